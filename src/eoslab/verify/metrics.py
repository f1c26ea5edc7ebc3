"""The run's figures: what the log holds, what the checker found, how fast the producers went,
and, when a consumer workload ran, what the consumers did.

Throughput and latency come from the history (the producers' own clocks): ``acked_per_s`` is
acknowledged records over the span from the first send to the last acknowledgement;
``processed_per_s`` is processings over the span of the consumption ledger's ``processed_ms``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf

from eoslab.rundir import RUN_FLAWS, ConsumptionInfo, Effect

LATENCY_QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
PERCENTILE_ACCURACY = 10_000


def log_summary(ledger: DataFrame) -> dict[str, int]:
    """Records of the run, foreign records, and how many partitions hold run records (a
    misplaced or corrupt record of the run is neither: it has an anomaly table of its own)."""
    run_record = sf.col("reason").isNull()
    foreign = ~sf.col("reason").isin(*RUN_FLAWS)
    row = (
        ledger.where(sf.col("offset").isNotNull())
        .agg(
            sf.count(sf.when(run_record, 1)).alias("records"),
            sf.countDistinct(sf.when(run_record, sf.col("partition"))).alias("partitions"),
            sf.count(sf.when(foreign, 1)).alias("foreign"),
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


def _is(column: str, value: str) -> Column:
    return sf.col(column) == value


def consumption_summary(
    consumer_ledger: DataFrame,
    commits: DataFrame,
    committed: Mapping[int, int],
    info: ConsumptionInfo,
) -> dict[str, Any]:
    """The consumer half's figures, under the run's handler mode: processings (by what they did
    to the sink), records processed, redeliveries, effects in the sink, records neither
    processed nor committed past (the group never got to them: no anomaly), processings and
    effects of records the log does not hold, and the commits (ok and failed, by trigger and
    error, the committed offset per partition)."""
    processing = _is("kind", "processed")
    never_read = (sf.col("processings") == 0) & (sf.col("landed") == 0)
    below_commit = sf.coalesce(sf.col("offset") < sf.col("committed_offset"), sf.lit(False))
    row = consumer_ledger.agg(
        sf.count_if(_is("kind", "record")).alias("records"),
        sf.count_if(processing).alias("processed"),
        *(sf.count_if(processing & _is("effect", e.value)).alias(e.value) for e in Effect),
        sf.count_if(sf.col("delivery") == 1).alias("records_processed"),
        sf.count_if(sf.col("delivery") > 1).alias("redelivered"),
        sf.count_if(_is("kind", "effect")).alias("effects"),
        sf.count_if(sf.col("effect_occurrence") == 1).alias("messages_with_effect"),
        sf.count_if(_is("kind", "record") & never_read & ~below_commit).alias("not_reached"),
        sf.count_if(processing & (sf.col("in_log") == 0)).alias("processed_not_in_log"),
        sf.count_if(_is("kind", "effect") & (sf.col("in_log") == 0)).alias("effects_not_in_log"),
        sf.min("processed_ms").alias("first_ms"),
        sf.max("processed_ms").alias("last_ms"),
    ).first()
    assert row is not None  # an aggregate without grouping has one row
    span_s = (row["last_ms"] - row["first_ms"]) / 1000 if row["processed"] else 0.0
    by_trigger: dict[str, dict[str, int]] = {}
    errors: dict[str, int] = {}
    for r in commits.groupBy("trigger", "error").agg(sf.count(sf.lit(1)).alias("n")).collect():
        counts = by_trigger.setdefault(r["trigger"], {"ok": 0, "failed": 0})
        counts["ok" if r["error"] is None else "failed"] += int(r["n"])
        if r["error"] is not None:
            errors[r["error"]] = errors.get(r["error"], 0) + int(r["n"])
    figures = {name: int(row[name]) for name in row.asDict() if not name.endswith("_ms")}
    return {
        "mode": info.mode,
        "group": info.group,
        "consumers": info.consumers,
        "sessions": len(info.sessions),
        **figures,
        "processed_per_s": row["processed"] / span_s if span_s > 0 else None,
        "commits": {
            "ok": sum(c["ok"] for c in by_trigger.values()),
            "failed": sum(c["failed"] for c in by_trigger.values()),
            "by_trigger": by_trigger,
            "errors": errors,
            "committed_offsets": {str(p): offset for p, offset in sorted(committed.items())},
        },
    }
