"""Airflow in the lab: its home and environment, and the functions the DAGs in `dags/` call."""
