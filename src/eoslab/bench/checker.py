"""The Spark checker against the naive one (one process, a consumer and Python dicts).

For each scale N: produce N small v1 messages into a fresh topic as fast as a non-idempotent
producer can (linger, big batches, lz4), write the matching history, then time
:func:`eoslab.verify.checker.verify_run` and :func:`eoslab.verify.naive.check` on the same run
and report records/s and the ratio naive/spark. Both must find nothing; their counts are
compared, so a fast but wrong checker shows up here too.

Two floors under the Spark checker, each written into a no-op sink: ``spark_read_s`` reads and
parses the topic through Spark's Kafka source, nothing else; ``spark_ledger_s`` also brings the
records together with the history (the ledger's one shuffle, which any comparison of log and
history needs) without keeping them. The target: the whole check within
:data:`TARGET_OVER_LEDGER` times ``spark_ledger_s`` at the largest scale, reported as met or not
with the figures to judge it. The naive checker stays as the comparison point (``naive_over_
spark``); the old target, 5 times the naive one at 8M records on 2 cores, was retired: the floor
alone (reading the topic and one shuffle) takes a third of the naive checker's time there.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from eoslab.admin import delete_topic
from eoslab.rundir import RunDir
from eoslab.runtime.topology import LabConfig
from eoslab.verify import naive
from eoslab.verify.checker import verify_run
from eoslab.verify.producer.history import read_history
from eoslab.verify.producer.ledger import build_ledger
from eoslab.verify.spark_session import build_session
from eoslab.verify.topic_reader import classify, read_raw
from eoslab.workload.synthetic import PARTITIONS, generate

DEFAULT_SCALES = [1_000_000, 2_000_000, 4_000_000, 8_000_000]
TARGET_OVER_LEDGER = 1.5


def _time_floors(spark: SparkSession, run_dir: RunDir) -> tuple[float, float]:
    """Seconds to read and parse the run's topic, and to build its ledger, written nowhere."""
    info = run_dir.read_info()
    records = classify(read_raw(spark, info.bootstrap, info.topic, info.partitions), info.run_id)
    ledger = build_ledger(records, read_history(spark, run_dir.history_dir))
    seconds = []
    for frame in (records, ledger):
        started = time.perf_counter()
        frame.write.format("noop").mode("overwrite").save()
        seconds.append(time.perf_counter() - started)
    return seconds[0], seconds[1]


def _growth(results: list[dict[str, Any]], seconds: str) -> float | None:
    """Time multiplied per records multiplied, smallest to largest scale (1.0 is linear)."""
    if len(results) < 2:
        return None
    first, last = results[0], results[-1]
    return round((last[seconds] / first[seconds]) / (last["records"] / first["records"]), 2)


def run(scales: list[int], bootstrap: str | None = None) -> dict[str, Any]:
    """Time both checkers at each scale on the lab's Kafka (or ``bootstrap``)."""
    bootstrap = bootstrap or LabConfig().bootstrap_servers
    spark = build_session()
    results = []
    for records in scales:
        with tempfile.TemporaryDirectory(prefix="eoslab-bench-checker-") as root:
            run_dir, produce_s = generate(bootstrap, Path(root), records)
            read_s, ledger_s = _time_floors(spark, run_dir)
            started = time.perf_counter()
            verdict = verify_run(run_dir.path, spark=spark, from_topic=True)
            spark_s = time.perf_counter() - started
            started = time.perf_counter()
            naive_result = naive.check(run_dir.path)
            naive_s = time.perf_counter() - started
            spark_counts = {c.name: c.observed for c in verdict.checks}
            results.append(
                {
                    "records": records,
                    "produce_s": round(produce_s, 2),
                    "produce_records_per_s": round(records / produce_s),
                    "spark_read_s": round(read_s, 2),
                    "spark_ledger_s": round(ledger_s, 2),
                    "spark_s": round(spark_s, 2),
                    "spark_records_per_s": round(records / spark_s),
                    "naive_s": round(naive_s, 2),
                    "naive_records_per_s": round(records / naive_s),
                    "naive_over_spark": round(naive_s / spark_s, 2),
                    "spark_over_ledger": round(spark_s / ledger_s, 2),
                    "conforms": verdict.conforms,
                    "counts_agree": all(
                        spark_counts.get(name) == count
                        for name, count in naive_result.counts.items()
                    ),
                }
            )
            delete_topic(bootstrap, run_dir.read_info().topic)
    largest = results[-1] if results else None
    return {
        "partitions": PARTITIONS,
        "master": spark.sparkContext.master,
        "scales": results,
        "growth": {"spark": _growth(results, "spark_s"), "naive": _growth(results, "naive_s")},
        "target": {
            "spark_over_ledger": TARGET_OVER_LEDGER,
            "at_records": largest and largest["records"],
            "measured": largest and largest["spark_over_ledger"],
            "met": bool(largest and largest["spark_over_ledger"] <= TARGET_OVER_LEDGER),
        },
    }
