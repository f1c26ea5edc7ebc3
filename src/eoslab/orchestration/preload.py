"""The lab's Airflow tasks' modules, loaded once in the scheduler before it forks.

Airflow's LocalExecutor runs every task in a process forked from one of its workers, and the
workers are forked from the scheduler: a module the scheduler has imported is already loaded in
every task process. Without that each task imported them again — the DAG file's modules, the
scenario executor, the checker with Great Expectations and PySpark, the report — 1-4 CPU-s a
task, three tasks a cell: about 60 CPU-s of a nine-cell `make lab` in lanes, more than the
scheduler, the API server, the DAG processor and the triggerer together. The lab's Airflow home
imports this module as its ``airflow_local_settings`` (every Airflow process of the lab does;
only the scheduler loads the modules).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

TASK_MODULES = (
    "eoslab.orchestration.tasks",
    "eoslab.orchestration.steps",
    "eoslab.verify.checker",
    "eoslab.report.render",
    "eoslab.report.history",
    "eoslab.probe.every_flow",
    "airflow.providers.apache.spark.hooks.spark_connect",
)


def preload_in_scheduler(argv: Sequence[str] = sys.argv) -> bool:
    """In ``airflow scheduler`` (``argv``), import :data:`TASK_MODULES`; whether it did."""
    if list(argv[1:2]) != ["scheduler"]:
        return False
    for module in TASK_MODULES:
        importlib.import_module(module)
    return True
