"""``effect_lost`` against a real topic and a sink written by the real idempotent handler: a
record whose key's later key_seq was applied first is skipped by the handler's guard and never
applied; the Spark checker finds exactly those messages, the naive checker counts the same, GX
agrees, and a clean run (redelivered records skipped as duplicates of effects that did land)
has none."""

from __future__ import annotations

import json
import sqlite3
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from consumer_runs import Member, PlantedConsumption
from planted_runs import PlantedRun, located, plant_clean
from pyspark.sql import SparkSession

from eoslab.message import Message, decode
from eoslab.rundir import CONSUMER_ANOMALIES, PRODUCER_ANOMALIES, RunDir, Verdict
from eoslab.verify import naive
from eoslab.verify.checker import verify_run

PLANTED = {
    "reorder": ">0",
    "key_reorder": ">0",
    "duplicate": ">0",
    "key_duplicate": ">0",
    "redelivered": ">0",
    "effect_lost": ">0",
}
"""The planted run's expectations: the producer's late retries (reordered, one written twice),
the redelivery after a rebalance and the lost effects."""


@dataclass(frozen=True)
class Checked:
    run: RunDir
    verdict: Verdict
    a: str
    """The producer session."""
    c1: Member
    c2: Member


def consumer_suite(verdict: Verdict) -> dict[str, tuple[bool, int | None]]:
    """The consumer suite's expectations: anomaly -> (success, unexpected rows)."""
    return {
        e.anomalies[0]: (e.success, e.unexpected)
        for e in verdict.gx.expectations
        if e.suite == "consumer_exactly_once"
    }


@pytest.fixture(scope="module")
def planted(
    spark: SparkSession, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Checked:
    """Producer session A's retries are written late: p0 holds key a as key_seqs 0, 2, 1, 3;
    p1 holds b:1, then b:0 twice (a retry written twice), then c:0 and c:1. Consumer c1 applies
    both partitions in log order with the idempotent handler and commits p1 past c:0 and p0 up
    to a:1 only; after a rebalance c2 processes p0 from a:1 again. Then the sink loses c:0's
    effect (a committed transaction gone: a restore from an older backup)."""
    root = tmp_path_factory.mktemp("effect-lost")
    run = PlantedRun(root=root, bootstrap=kafka_bootstrap, partitions=2)
    a = run.session()
    layout = {
        0: [(0, "a", 0), (2, "a", 2), (1, "a", 1), (3, "a", 3)],
        1: [(1, "b", 1), (0, "b", 0)],
    }
    messages: dict[tuple[int, int], Message] = {}
    for partition, sends in layout.items():
        for offset, (seq, key, key_seq) in enumerate(sends):
            messages[(partition, offset)] = run.message(a, partition, seq, key, key_seq)
            run.sent_and_acked(messages[(partition, offset)], offset)
    run.log(messages[(1, 1)])  # b:0 written a second time, at offset 2
    messages[(1, 2)] = messages[(1, 1)]
    for offset, (seq, key_seq) in ((3, (2, 0)), (4, (3, 1))):
        messages[(1, offset)] = run.message(a, 1, seq, "c", key_seq)
        run.sent_and_acked(messages[(1, offset)], offset)
    run_dir, offsets = run.write(expected=PLANTED)
    assert offsets == [0, 1, 2, 3, 0, 1, 2, 3, 4]

    consumption = PlantedConsumption(run_id=run.run_id, mode="idempotent")
    c1 = Member(consumer=0, session=uuid.uuid4().hex, generation=1)
    c2 = Member(consumer=1, session=uuid.uuid4().hex, generation=2)
    for partition, offset in ((0, 0), (0, 1)):
        consumption.process(c1, partition, offset, messages[(partition, offset)], effect=None)
    consumption.commit(c1, 0, 2)
    for partition, offset in ((0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3)):
        consumption.process(c1, partition, offset, messages[(partition, offset)], effect=None)
    consumption.commit(c1, 1, 4)
    for offset in (2, 3):
        consumption.process(c2, 0, offset, messages[(0, offset)], effect=None)
    consumption.commit(c2, 0, 4)
    consumption.write(run_dir, str(run_dir.sink_sqlite))
    with sqlite3.connect(run_dir.sink_sqlite) as sink:
        assert sink.execute("DELETE FROM effects WHERE key = 'c'").rowcount == 1

    verdict = verify_run(run_dir.path, spark=spark)
    return Checked(run_dir, verdict, a, c1, c2)


def test_the_lost_effects_are_found_exactly_where_they_were_planted(planted: Checked) -> None:
    run, a, c1 = planted.run, planted.a, planted.c1.session
    assert located(
        run,
        "effect_lost",
        "partition",
        "offset",
        "message_id",
        "key",
        "key_seq",
        "effect",
        "consumer_session",
        "processings",
    ) == [
        # skipped by the guard (a:2 applied before it), by c1 and again by c2: one message
        (0, 2, f"{a}:0:1", "a", 1, "duplicate", c1, 2),
        # skipped (b:1 applied before it) in both copies: one message, at its first copy
        (1, 1, f"{a}:1:0", "b", 0, "duplicate", c1, 1),
        # applied, and gone from the sink
        (1, 3, f"{a}:1:2", "c", 0, "applied", c1, 1),
    ]
    processed = {
        (r[0], r[1]): r[2] for r in located(run, "redelivered", "partition", "offset", "effect")
    }
    assert processed == {(0, 2): "duplicate", (0, 3): "duplicate"}  # a:3 is no lost effect


def test_the_verdict_gx_and_the_naive_checker_agree(planted: Checked) -> None:
    run, verdict = planted.run, planted.verdict
    counts = json.loads(run.metrics_json.read_text())["anomalies"]
    assert {name: n for name, n in counts.items() if n} == {
        "reorder": 2,
        "key_reorder": 2,
        "duplicate": 1,
        "key_duplicate": 1,
        "redelivered": 2,
        "effect_lost": 3,
    }
    assert naive.check(run.path).counts == counts
    assert verdict.conforms, verdict.mismatches
    # the processings of lost messages: a:1 twice, b:0 in both copies, c:0 once
    assert consumer_suite(verdict)["effect_lost"] == (False, 5)
    assert {name for name, (success, _) in consumer_suite(verdict).items() if success} == {
        "unprocessed",
        "effect_duplicate",
        "effect_reorder",
    }
    assert verdict.gx.suites["consumer_exactly_once"].version == 2
    assert verdict.gx.agrees_with_anomalies


def test_the_check_fails_when_no_effect_may_be_lost(spark: SparkSession, planted: Checked) -> None:
    run = planted.run
    info = run.read_info()
    run.write_info(info.model_copy(update={"expected": {**PLANTED, "effect_lost": "0"}}))
    try:
        verdict = verify_run(run.path, spark=spark)
    finally:
        run.write_info(info)

    assert [(m.name, m.expected, m.observed) for m in verdict.mismatches] == [
        ("effect_lost", "0", 3)
    ]
    assert [e["offset"] for e in verdict.mismatches[0].examples] == [2, 1, 3]


def test_a_clean_run_redelivered_and_skipped_as_duplicates_loses_nothing(
    spark: SparkSession, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Every record applied once in log order by the idempotent handler; after a rebalance the
    last three records of partition 0 come again and are skipped: their effects are there."""
    run = plant_clean(tmp_path, kafka_bootstrap, records_per_partition=10)
    run_dir, offsets = run.write()
    consumption = PlantedConsumption(run_id=run.run_id, mode="idempotent")
    c1 = Member(consumer=0, session=uuid.uuid4().hex, generation=1)
    c2 = Member(consumer=1, session=uuid.uuid4().hex, generation=2)
    ends: dict[int, int] = {}
    for (partition, key, value), offset in zip(run.sends, offsets, strict=True):
        consumption.process(c1, partition, offset, decode(key, value), effect=None)
        ends[partition] = offset + 1
    for partition, end in ends.items():
        consumption.commit(c1, partition, end if partition else end - 3)
    for (partition, key, value), offset in zip(run.sends, offsets, strict=True):
        if partition == 0 and offset >= ends[0] - 3:
            consumption.process(c2, partition, offset, decode(key, value), effect=None)
    consumption.commit(c2, 0, ends[0])
    consumption.write(run_dir, str(run_dir.sink_sqlite))

    verdict = verify_run(run_dir.path, spark=spark)

    assert verdict.conforms, verdict.mismatches
    observed = {check.name: check.observed for check in verdict.checks}
    assert {name: observed[name] for name in (*PRODUCER_ANOMALIES, *CONSUMER_ANOMALIES)} == {
        **dict.fromkeys((*PRODUCER_ANOMALIES, *CONSUMER_ANOMALIES), 0),
        "redelivered": 3,
    }
    assert located(run_dir, "redelivered", "effect") == [("duplicate",)] * 3
    assert verdict.gx.suites["consumer_exactly_once"].success
    assert verdict.gx.agrees_with_anomalies
    counts = json.loads(run_dir.metrics_json.read_text())["anomalies"]
    assert naive.check(run_dir.path).counts == counts
