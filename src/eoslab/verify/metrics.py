"""The run's figures: what the log holds, what the checker found, how fast the producers went.

Throughput and latency come from the history (the producers' own clocks): ``acked_per_s`` is
acknowledged records over the span from the first send to the last acknowledgement.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

LATENCY_QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
PERCENTILE_ACCURACY = 10_000


def log_summary(ledger: DataFrame) -> dict[str, int]:
    """Records of the run, foreign records, and how many partitions hold run records."""
    run_record = sf.col("reason").isNull()
    row = (
        ledger.where(sf.col("offset").isNotNull())
        .agg(
            sf.count(sf.when(run_record, 1)).alias("records"),
            sf.countDistinct(sf.when(run_record, sf.col("partition"))).alias("partitions"),
            sf.count(sf.when(~run_record, 1)).alias("foreign"),
        )
        .first()
    )
    assert row is not None  # an aggregate without grouping has one row
    return {
        "records": int(row["records"]),
        "partitions_with_records": int(row["partitions"]),
        "foreign": int(row["foreign"]),
    }


def history_summary(history: DataFrame) -> dict[str, Any]:
    """Sends by outcome and by error name, latency quantiles and throughput of acked sends."""
    outcomes: dict[str, int] = {}
    errors: dict[str, int] = {}
    for r in history.groupBy("outcome", "error").agg(sf.count(sf.lit(1)).alias("n")).collect():
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + int(r["n"])
        if r["error"] is not None:
            errors[r["error"]] = errors.get(r["error"], 0) + int(r["n"])
    acked = history.where(sf.col("outcome") == "ack")
    row = acked.agg(
        sf.count(sf.lit(1)).alias("acked"),
        sf.percentile_approx(
            "latency_ms", list(LATENCY_QUANTILES.values()), PERCENTILE_ACCURACY
        ).alias("quantiles"),
        sf.max("latency_ms").alias("max"),
        sf.min("send_ms").alias("first_send_ms"),
        sf.max("ack_ms").alias("last_ack_ms"),
    ).first()
    assert row is not None  # an aggregate without grouping has one row
    quantiles = row["quantiles"] or [None] * len(LATENCY_QUANTILES)
    latency: dict[str, float | None] = dict(zip(LATENCY_QUANTILES, quantiles, strict=True))
    latency["max"] = row["max"]
    span_s = (
        (row["last_ack_ms"] - row["first_send_ms"]) / 1000
        if row["acked"] and row["last_ack_ms"] is not None
        else 0.0
    )
    return {
        "sends": sum(outcomes.values()),
        "outcomes": outcomes,
        "errors": errors,
        "latency_ms": latency,
        "throughput": {
            "acked": int(row["acked"]),
            "seconds": span_s,
            "acked_per_s": row["acked"] / span_s if span_s > 0 else None,
        },
    }
