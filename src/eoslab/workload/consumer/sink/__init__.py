"""The sink: the transactional database a consumer workload applies records to (seed ``004_*``).

Every record is an order command; the effect of a record is its order's state change plus
one row in the append-only ``effects`` table, so an effect applied twice or out of order
shows in the sink itself. SQLite (a file in the run directory) by default, PostgreSQL when a
URL is given; the same SQL on both.
"""
