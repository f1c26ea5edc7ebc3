"""Records a delete-records step moved the log start past are deleted, not lost: Spark's
history and the naive checker's excuse the same acknowledged rows (kafka-7190's run, whose
naive checker once counted them lost and made the cell invalid)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from eoslab.rundir import HISTORY_SCHEMA, Outcome
from eoslab.verify.producer import history, naive


def _history(folder: Path) -> None:
    rows: list[dict[str, Any]] = [
        # partition 0: three acknowledged, the log start moved to 2; partition 1: untouched
        {"partition": 0, "seq": 0, "offset": 0, "outcome": Outcome.ACK.value},
        {"partition": 0, "seq": 1, "offset": 1, "outcome": Outcome.ACK.value},
        {"partition": 0, "seq": 2, "offset": 2, "outcome": Outcome.ACK.value},
        {"partition": 0, "seq": 3, "offset": None, "outcome": Outcome.FAIL.value},
        {"partition": 1, "seq": 0, "offset": 0, "outcome": Outcome.ACK.value},
    ]
    full = [
        {
            "run_id": "r",
            "session_id": "s",
            "producer": 0,
            "key": f"k{row['partition']}",
            "key_seq": row["seq"],
            "send_ms": 0,
            "error": None,
            "ack_ms": None,
            "latency_ms": None,
            **row,
        }
        for row in rows
    ]
    folder.mkdir()
    pq.write_table(pa.Table.from_pylist(full, schema=HISTORY_SCHEMA), folder / "h.parquet")


def test_records_below_the_moved_log_start_are_deleted_by_both_checkers(
    spark: SparkSession, tmp_path: Path
) -> None:
    folder = tmp_path / "history"
    _history(folder)
    starts = {0: 2}
    by_naive = [(p, s, o) for _, p, s, _, _, o in naive.read_history(folder, starts)]
    by_spark = sorted(
        (r["partition"], r["seq"], r["outcome"])
        for r in history.read_history(spark, folder, starts).collect()
    )
    assert (
        sorted(by_naive)
        == by_spark
        == [
            (0, 0, "deleted"),
            (0, 1, "deleted"),
            (0, 2, "ack"),
            (0, 3, "fail"),
            (1, 0, "ack"),
        ]
    )
    log = [
        naive.LogRecord(0, 2, "s", 2, "k0", 2),
        naive.LogRecord(1, 0, "s", 0, "k1", 0),
    ]
    counts = naive.count_anomalies(log, naive.read_history(folder, starts))
    assert (counts["lost"], counts["gap"], counts["key_gap"]) == (0, 0, 0)
    # the control: without the moved start, the two absent records are lost
    counts = naive.count_anomalies(log, naive.read_history(folder))
    assert (counts["lost"], counts["gap"]) == (2, 2)
