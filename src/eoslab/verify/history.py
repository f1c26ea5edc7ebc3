"""Read the workload's history ledger (a Parquet dataset) with the contract's schema."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from eoslab.rundir import HISTORY_SCHEMA, Outcome

EXCUSED_OUTCOMES = (Outcome.FAIL.value, Outcome.UNSENT.value)
"""Outcomes that say a record was certainly not written: a sequence skipped for them is no gap."""

NOT_ACKED_OUTCOMES = (Outcome.FAIL.value, Outcome.INDETERMINATE.value, Outcome.UNSENT.value)
"""Outcomes after which a record found in the log counts as `indeterminate`."""


def read_history(spark: SparkSession, history_dir: Path) -> DataFrame:
    """The history rows; an empty (or missing) folder reads as no rows, not as an error, so a
    run whose producers never reported is checked and its records show up as phantoms."""
    schema = from_arrow_schema(HISTORY_SCHEMA)
    if not any(history_dir.glob("*.parquet")):
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(str(history_dir))
