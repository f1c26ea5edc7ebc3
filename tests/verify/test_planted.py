"""The Spark checker against a real topic with planted anomalies: each one is found exactly
where it was planted, the naive checker counts the same, and the verdict judges them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from planted_runs import PLANTED_EXPECTED, PlantedRun, located, plant_anomalies, rows
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from eoslab.admin import delete_topic, topic_exists
from eoslab.rundir import RunDir
from eoslab.verify import naive, spark_session
from eoslab.verify.checker import verify_run
from eoslab.verify.command import app as verify_app


@pytest.fixture(scope="module")
def planted(
    spark: SparkSession, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[RunDir, dict[str, str]]:
    run, sessions = plant_anomalies(tmp_path_factory.mktemp("runs"), kafka_bootstrap)
    run_dir, offsets = run.write(expected=PLANTED_EXPECTED)
    assert offsets == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5, 6]
    verify_run(run_dir.path, spark=spark)
    return run_dir, sessions


def test_each_planted_anomaly_is_found_exactly_where_it_was_planted(
    planted: tuple[RunDir, dict[str, str]],
) -> None:
    run, sessions = planted
    a, b = sessions["A"], sessions["B"]
    where = ("session_id", "partition", "offset", "seq")
    assert located(run, "duplicate", *where, "first_offset") == [(a, 0, 3, 2, 2)]
    assert located(run, "key_duplicate", "key", "partition", "offset", "key_seq") == [
        ("k0", 0, 3, 2)
    ]
    assert located(run, "indeterminate", *where, "outcome") == [(a, 0, 5, 4, "indeterminate")]
    assert located(run, "reorder", *where, "highest_earlier_seq") == [(a, 1, 2, 1, 2)]
    assert located(run, "key_reorder", "key", "partition", "offset", "key_seq") == [
        ("k9", 0, 7, 0),
        ("k1", 1, 2, 1),
    ]
    assert located(run, "phantom", *where) == [(b, 1, 4, 0)]
    assert located(run, "gap", *where, "previous_seq", "next_seq", "outcome") == [
        (a, 2, 2, 2, 1, 3, "indeterminate")
    ]
    assert located(run, "key_gap", "key", "partition", "offset", "key_seq", "seq") == [
        ("k2", 2, 2, 2, 2)
    ]
    assert located(run, "lost", *where) == [(a, 2, 7, 7)]
    assert located(run, "foreign", "partition", "offset", "reason") == [
        (2, 5, "another run"),
        (2, 6, "not a workload message"),
    ]
    assert located(run, "misplaced", "partition", "offset", "reason") == [(0, 8, "misplaced")]
    assert located(run, "corrupt", "partition", "offset", "reason") == [(0, 9, "corrupt")]
    assert located(run, "corrupt", "value_head")[0][0].startswith(f"eos2|{run.run_id}|")
    # bytes that are no UTF-8 are stored as valid UTF-8: pyarrow (above) reads the table
    head = located(run, "foreign", "value_head")[1][0]
    assert isinstance(head, str)
    assert head.startswith("hel")
    assert head.endswith("lo")
    assert "\ufffd" in head


def test_the_settings_for_large_runs_find_the_same_anomalies(
    spark: SparkSession,
    planted: tuple[RunDir, dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A small run is checked with 2 partitions and neither adaptive execution nor code
    generation, and GX evaluates its queries as it does; the settings for millions of records,
    and GX reading each query's result cached beforehand, must find the very same rows and
    give the very same GX results."""
    run, _ = planted

    def gx_results() -> list[tuple[str, str, bool, int | None]]:
        gx = run.read_verdict().gx
        return [(e.suite, e.check, e.success, e.unexpected) for e in gx.expectations]

    tables = [name for name in PLANTED_EXPECTED if name != "errors"]
    small = {name: located(run, name, "partition", "offset") for name in tables}
    small_gx = gx_results()
    assert all(small.values())
    assert not all(success for _, _, success, _ in small_gx)
    monkeypatch.setattr(spark_session, "SMALL_RUN_RECORDS", 0)

    verify_run(run.path, spark=spark)

    assert {name: located(run, name, "partition", "offset") for name in small} == small
    assert gx_results() == small_gx
    assert run.read_verdict().gx.agrees_with_anomalies
    assert spark.conf.get("spark.sql.adaptive.enabled") == "true"  # the session's own, back
    assert not [t for t in spark.catalog.listTables() if t.name.startswith("eoslab_gx_")]


def test_planted_counts_metrics_and_verdict(planted: tuple[RunDir, dict[str, str]]) -> None:
    run, _ = planted
    metrics = json.loads(run.metrics_json.read_text())
    assert metrics["anomalies"] == {
        "lost": 1,
        "duplicate": 1,
        "reorder": 1,
        "gap": 1,
        "phantom": 1,
        "indeterminate": 1,
        "key_duplicate": 1,
        "key_reorder": 2,
        "key_gap": 1,
        "misplaced": 1,
        "corrupt": 1,
        "foreign": 2,
    }
    assert metrics["records"] == 18
    assert metrics["partitions_with_records"] == 3
    assert metrics["outcomes"] == {"ack": 16, "indeterminate": 2, "fail": 1}
    assert metrics["errors"] == {"_MSG_TIMED_OUT": 2, "MSG_SIZE_TOO_LARGE": 1}
    assert metrics["latency_ms"] == {"p50": 8.0, "p95": 16.0, "p99": 16.0, "max": 16.0}
    throughput = metrics["throughput"]
    assert throughput["acked"] == 16
    assert throughput["acked_per_s"] == pytest.approx(16 / throughput["seconds"])

    verdict = json.loads(run.verdict_json.read_text())
    assert verdict["conforms"] is True, verdict["mismatches"]
    assert verdict["mismatches"] == []
    checks = {check["name"]: check for check in verdict["checks"]}
    assert checks["duplicate"]["observed"] == 1
    assert checks["duplicate"]["examples"][0]["offset"] == 3
    assert checks["errors._MSG_TIMED_OUT"]["observed"] == 2
    gx = verdict["gx"]
    assert gx["success"] is False
    assert gx["agrees_with_anomalies"] is True
    assert {e["check"]: e["success"] for e in gx["expectations"]} == dict.fromkeys(
        {e["check"] for e in gx["expectations"]}, False
    )
    assert Path(verdict["links"]["data_docs"]).is_file()


def test_naive_checker_counts_the_same(
    planted: tuple[RunDir, dict[str, str]], kafka_bootstrap: str
) -> None:
    run, _ = planted
    metrics = json.loads(run.metrics_json.read_text())
    assert naive.check(run.path).counts == metrics["anomalies"]


def test_a_key_spread_over_partitions_is_checked_per_partition(
    spark: SparkSession, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Key "kx" is in partitions 0 and 1 (the workload never does that, a user's producer may):
    key reorders are judged within each partition, so only partition 1 holds one (key_seq 1
    after 3), and the key sequences are complete across both."""
    run = PlantedRun(root=tmp_path, bootstrap=kafka_bootstrap, partitions=2)
    a = run.session()
    for partition, key_seqs in ((0, (0, 2)), (1, (3, 1))):
        for seq, key_seq in enumerate(key_seqs):
            run.sent_and_acked(run.message(a, partition, seq, "kx", key_seq), seq)
    run_dir, _ = run.write(expected={"key_reorder": ">0"})

    verdict = verify_run(run_dir.path, spark=spark)

    assert located(run_dir, "key_reorder", "key", "partition", "offset", "key_seq") == [
        ("kx", 1, 1, 1)
    ]
    counts = json.loads(run_dir.metrics_json.read_text())["anomalies"]
    assert {name: n for name, n in counts.items() if n} == {"key_reorder": 1}
    assert verdict.conforms
    assert naive.check(run_dir.path).counts == counts


def test_a_run_rechecks_to_the_same_verdict_after_its_topic_is_deleted(
    spark: SparkSession, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The first check keeps the log in the run directory (topic/); with the topic deleted the
    run checks again to the same checks and the same anomaly rows, and a check that asks for
    the topic itself says in one line that it is gone and where the copy is."""
    run, _ = plant_anomalies(tmp_path, kafka_bootstrap)
    run_dir, _ = run.write(expected=PLANTED_EXPECTED)
    first = verify_run(run_dir.path, spark=spark)
    assert run_dir.has_topic_snapshot
    tables = {name: rows(run_dir, name) for name in first.links.anomalies}
    assert delete_topic(kafka_bootstrap, run.topic)
    assert not topic_exists(kafka_bootstrap, run.topic)

    again = verify_run(run_dir.path, spark=spark)

    assert again.checks == first.checks
    assert {name: rows(run_dir, name) for name in again.links.anomalies} == tables
    assert tables["duplicate"]  # the same anomalies, not two empty checks
    assert tables["lost"]
    refused = CliRunner().invoke(verify_app, [str(run_dir.path), "--from-topic"])
    assert refused.exit_code == 1
    assert f"topic {run.topic} is not on {kafka_bootstrap}" in refused.output
    assert "check without --from-topic" in refused.output
    assert "Traceback" not in refused.output
    assert run_dir.has_topic_snapshot  # the copy is kept
