"""The consumer half against a real topic, a planted consumption ledger and a real sink (SQLite,
and PostgreSQL once): each consumer anomaly is found exactly where it was planted, the figures
and the verdict follow, and every consumer check fails when it is expected absent."""

from __future__ import annotations

import json
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from consumer_runs import Member, PlantedConsumption
from planted_runs import PlantedRun, located
from pyspark.sql import SparkSession

from eoslab.message import Message
from eoslab.rundir import CONSUMER_ANOMALIES, Effect, RunDir, Verdict
from eoslab.verify import naive
from eoslab.verify.checker import verify_run
from eoslab.verify.consumer.sink_location import PASSWORD_VARIABLE

FOUND: dict[str, object] = {
    "duplicate": ">0",
    "key_duplicate": ">0",
    "foreign": ">0",
    **dict.fromkeys(CONSUMER_ANOMALIES, ">0"),
    "effect_lost": "0",
    "inconsistent_offset": "0",
}
"""The planted run's expectations: every consumer anomaly but a lost effect (planted in
test_effect_lost: here every processed message has its effect, a:1 skipped as a duplicate and
d:1 without its ledger row included) and an inconsistent offset (planted in
test_an_offset_found_holding_another_record_is_inconsistent: here every read of a place found
the log's record), and the producer duplicate (p0, 7)."""
FOREIGN_VALUE = b"not a workload record"


@dataclass(frozen=True)
class Planted:
    run: RunDir
    pristine: Path
    """A copy of the run directory before its consumer half was planted."""
    consumption: PlantedConsumption
    a: str
    """The producer session."""
    c1: Member
    c2: Member


def plant(root: Path, bootstrap: str) -> tuple[PlantedRun, PlantedConsumption, Member, Member]:
    """Producer session A writes keys a (p0), b (p1), c and d (p2); see the comments for what the
    consumers c1 (generation 1) and c2 (generation 2) do with them."""
    run = PlantedRun(root=root, bootstrap=bootstrap)
    a = run.session()
    a5, b4, c4, d2 = ["a"] * 5, ["b"] * 4, ["c"] * 4, ["d"] * 2
    keys: dict[int, list[str | None]] = {
        0: [*a5, None, "a"],
        1: [*b4, None, "b", "b"],
        2: [*c4, *d2],
    }
    messages: dict[tuple[int, int], object] = {}
    for partition, layout in keys.items():
        key_seqs: dict[str, int] = {}
        for offset, key in enumerate(layout):
            if key is None:
                run.log_raw(partition, FOREIGN_VALUE)
                continue
            seq = sum(1 for k in layout[:offset] if k is not None)
            message = run.message(a, partition, seq, key, key_seqs.get(key, 0))
            key_seqs[key] = message.key_seq + 1
            run.sent_and_acked(message, offset)
            messages[(partition, offset)] = message
    # p0: message a:5 written twice by the producer, at offsets 6 and 7
    run.log(messages[(0, 6)])  # type: ignore[arg-type]
    messages[(0, 7)] = messages[(0, 6)]

    consumption = PlantedConsumption(run_id=run.run_id)
    c1 = Member(consumer=0, session=uuid.uuid4().hex, generation=1)
    c2 = Member(consumer=1, session=uuid.uuid4().hex, generation=2)

    def process(member: Member, partition: int, offset: int, **how: object) -> None:
        message = messages.get((partition, offset))
        consumption.process(member, partition, offset, message, **how)  # type: ignore[arg-type]

    # c1 applies p0 0-2 and commits 3 (its client told p0's high watermark: 8)
    for offset in range(3):
        process(c1, 0, offset, watermark=8)
    consumption.commit(c1, 0, 3)
    # c1 skips p1 2 and the foreign record at p1 4, commits 6 (a commit of 7 fails): both are
    # unprocessed; p1 6 (b:5) is not, nothing committed past it
    for offset in (0, 1, 3, 5):
        process(c1, 1, offset)
    consumption.commit(c1, 1, 6)
    consumption.commit(c1, 1, 7, error="ILLEGAL_GENERATION")
    # p2: c2 applies c:3 before the zombie c1 applies c:2 (effect_reorder); d:1's effect lands
    # without its ledger row (killed in between): not unprocessed
    # (c1 was told p2's high watermark 6, c2 one of 5 after it: two readers, no regression)
    process(c1, 2, 0, watermark=6)
    process(c1, 2, 1)
    process(c2, 2, 3, watermark=5)
    process(c1, 2, 2, watermark=6)
    process(c2, 2, 4, watermark=5)
    process(c2, 2, 5, journaled=False)
    consumption.commit(c2, 2, 6)
    # c2 takes p0 over from 1: a:1 is redelivered and skipped (no effect), a:2 is redelivered
    # and applied again (effect_duplicate); both copies of a:5 are applied (effect_duplicate)
    process(c2, 0, 1, effect=Effect.DUPLICATE, watermark=7)
    for offset in range(2, 8):
        process(c2, 0, offset, watermark=8)
    consumption.commit(c2, 0, 8)
    # what the consumers saw: c1 jumped over p1 2 and p1 4 in generation 1 (two poll skips);
    # c2 goes back to the foreign record at p0 5 in its generation (a nonmonotonic poll, a
    # redelivery), told p0's high watermark 7 after 8 (a watermark regression), and commits 6
    # after its 8 (an offset regression)
    process(c2, 0, 5, watermark=7)
    consumption.commit(c2, 0, 6)
    return run, consumption, c1, c2


@pytest.fixture(scope="module")
def planted(
    spark: SparkSession, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Planted:
    root = tmp_path_factory.mktemp("consumer-runs")
    run, consumption, c1, c2 = plant(root, kafka_bootstrap)
    run_dir, offsets = run.write(expected=FOUND)
    assert offsets == [*range(7), *range(7), *range(6), 7]
    pristine = shutil.copytree(run_dir.path, root / "pristine")
    consumption.write(run_dir, str(run_dir.sink_sqlite))
    verify_run(run_dir.path, spark=spark)
    a = next(iter(run.sessions))
    return Planted(run_dir, pristine, consumption, a, c1, c2)


def test_each_consumer_anomaly_is_found_exactly_where_it_was_planted(planted: Planted) -> None:
    run, a, c1, c2 = planted.run, planted.a, planted.c1.session, planted.c2.session
    assert located(run, "unprocessed", "partition", "offset", "message_id", "reason") == [
        (1, 2, f"{a}:1:2", None),
        (1, 4, None, "not a workload message"),
    ]
    assert located(
        run, "redelivered", "partition", "offset", "effect", "consumer_session", "delivery"
    ) == [(0, 1, "duplicate", c2, 2), (0, 2, "applied", c2, 2), (0, 5, "foreign", c2, 2)]
    assert [r[0] for r in located(run, "redelivered", "first_processed_by")] == [c1, c1, c2]
    assert located(
        run, "poll_skip", "partition", "offset", "previous_offset", "skipped", "consumer_session"
    ) == [(1, 3, 1, 1, c1), (1, 5, 3, 1, c1)]
    assert located(
        run, "nonmonotonic_poll", "partition", "offset", "previous_offset", "consumer_session"
    ) == [(0, 5, 7, c2)]
    assert located(
        run, "watermark_regression", "partition", "offset", "watermark", "highest_before", "n"
    ) == [(0, 5, 7, 8, 10)]
    assert [r[0] for r in located(run, "watermark_regression", "consumer_session")] == [c2]
    assert located(
        run, "offset_regression", "partition", "offset", "previous_offset", "consumer_session"
    ) == [(0, 6, 8, c2)]
    assert located(
        run,
        "effect_duplicate",
        "partition",
        "offset",
        "key",
        "key_seq",
        "apply_order",
        "first_offset",
        "first_apply_order",
        "first_consumer_session",
    ) == [(0, 2, "a", 2, 14, 2, 3, c1), (0, 7, "a", 5, 18, 6, 17, c2)]
    assert located(
        run,
        "effect_reorder",
        "partition",
        "offset",
        "message_id",
        "apply_order",
        "consumer_session",
        "highest_earlier_key_seq",
    ) == [(2, 2, f"{a}:2:2", 11, c1, 3)]


def test_consumer_figures_and_verdict(planted: Planted) -> None:
    run = planted.run
    metrics = json.loads(run.metrics_json.read_text())
    assert metrics["anomalies"] == {
        **dict.fromkeys(
            (
                "lost",
                "reorder",
                "gap",
                "phantom",
                "indeterminate",
                "key_reorder",
                "key_gap",
                "misplaced",
                "corrupt",
            ),
            0,
        ),
        "duplicate": 1,
        "key_duplicate": 1,
        "foreign": 2,
        "unprocessed": 2,
        "redelivered": 3,
        "effect_duplicate": 2,
        "effect_reorder": 1,
        "effect_lost": 0,
        "poll_skip": 2,
        "nonmonotonic_poll": 1,
        "watermark_regression": 1,
        "offset_regression": 1,
        "inconsistent_offset": 0,
    }
    assert naive.check(run.path).counts == metrics["anomalies"]
    consumption = metrics["consumption"]
    assert consumption.pop("processed_per_s") == pytest.approx(20 / 0.025)
    assert consumption == {
        "mode": "commit-after",
        "group": f"eoslab-{run.run_id}",
        "consumers": 2,
        "sessions": 2,
        "records": 21,
        "processed": 20,
        "applied": 17,
        "duplicate": 1,
        "foreign": 2,
        "records_processed": 17,
        "redelivered": 3,
        "effects": 18,
        "messages_with_effect": 16,
        "not_reached": 1,
        "processed_not_in_log": 0,
        "effects_not_in_log": 0,
        "commits": {
            "ok": 5,
            "failed": 1,
            "by_trigger": {"every": {"ok": 5, "failed": 1}},
            "errors": {"ILLEGAL_GENERATION": 1},
            "committed_offsets": {"0": 8, "1": 6, "2": 6},
        },
    }

    verdict = run.read_verdict()
    assert verdict.conforms, verdict.mismatches
    checks = {check.name: check for check in verdict.checks}
    assert [checks[name].observed for name in CONSUMER_ANOMALIES] == [2, 3, 2, 1, 0, 2, 1, 1, 1, 0]
    assert checks["effect_duplicate"].examples[0]["offset"] == 2
    consumer_suite = [e for e in verdict.gx.expectations if e.suite == "consumer_exactly_once"]
    assert {(e.anomalies[0], e.success) for e in consumer_suite} == {
        ("unprocessed", False),
        ("effect_duplicate", False),
        ("effect_reorder", False),
        ("effect_lost", True),
    }
    assert verdict.gx.suites["consumer_exactly_once"].version == 2
    assert [
        (e.suite, e.anomalies, e.success)
        for e in verdict.gx.expectations
        if e.suite in ("consumer_polls", "committed_offsets")
    ] == [
        ("consumer_polls", ["poll_skip"], False),
        ("consumer_polls", ["nonmonotonic_poll"], False),
        ("consumer_polls", ["watermark_regression"], False),
        ("consumer_polls", ["inconsistent_offset"], True),
        ("committed_offsets", ["offset_regression"], False),
    ]
    assert verdict.gx.agrees_with_anomalies
    assert set(verdict.links.anomalies) >= set(CONSUMER_ANOMALIES)


def test_every_consumer_check_fails_when_its_planted_anomaly_is_expected_absent(
    spark: SparkSession, planted: Planted
) -> None:
    run = planted.run
    info = run.read_info()
    absent = {**FOUND, **dict.fromkeys(CONSUMER_ANOMALIES, "0")}
    run.write_info(info.model_copy(update={"expected": absent}))
    try:
        verdict = verify_run(run.path, spark=spark)
    finally:
        run.write_info(info)

    assert not verdict.conforms
    assert [(m.name, m.expected, m.observed) for m in verdict.mismatches] == [
        ("unprocessed", "0", 2),
        ("redelivered", "0", 3),
        ("effect_duplicate", "0", 2),
        ("effect_reorder", "0", 1),
        ("poll_skip", "0", 2),
        ("nonmonotonic_poll", "0", 1),
        ("watermark_regression", "0", 1),
        ("offset_regression", "0", 1),
    ]
    assert all(m.examples for m in verdict.mismatches)


def four_records(planted: PlantedRun) -> tuple[str, list[Message]]:
    """Producer session a writes p0 0-3 (key k, key_seq the offset), each acknowledged."""
    a = planted.session()
    messages = [planted.message(a, 0, offset, "k", offset) for offset in range(4)]
    for offset, message in enumerate(messages):
        planted.sent_and_acked(message, offset)
    return a, messages


def judged(
    planted: PlantedRun,
    consumption: PlantedConsumption,
    expected: dict[str, object],
    spark: SparkSession,
) -> tuple[RunDir, Verdict, dict[str, object]]:
    """The planted run and its consumption written and checked: it conforms to ``expected``;
    its verdict and the consumer anomalies' counts."""
    run, _ = planted.write(expected=expected)
    consumption.write(run, str(run.sink_sqlite))
    verdict = verify_run(run.path, spark=spark)
    assert verdict.conforms, verdict.mismatches
    observed = {check.name: check.observed for check in verdict.checks}
    return run, verdict, {name: observed[name] for name in CONSUMER_ANOMALIES}


def test_an_offset_found_holding_another_record_is_inconsistent(
    spark: SparkSession, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """c1 reads p0 0-3 as the log holds them; c2, a generation later, read offset 2 as another
    record of the run, one the log does not hold (what a consumer of a record truncated away
    and replaced would have read): that place is an inconsistent offset, and nothing else is
    an anomaly. Expected absent, its check fails; the naive checker counts the same."""
    planted = PlantedRun(root=tmp_path, bootstrap=kafka_bootstrap)
    a, messages = four_records(planted)
    replaced = planted.message(a, 0, 9, "k", 9)  # of the run, never in the log
    consumption = PlantedConsumption(run_id=planted.run_id)
    c1 = Member(consumer=0, session=uuid.uuid4().hex, generation=1)
    c2 = Member(consumer=1, session=uuid.uuid4().hex, generation=2)
    for offset, message in enumerate(messages):
        consumption.process(c1, 0, offset, message)
    consumption.commit(c1, 0, 4)
    consumption.process(c2, 0, 2, replaced)
    run, verdict, counts = judged(planted, consumption, {"inconsistent_offset": ">0"}, spark)
    assert counts == {
        **dict.fromkeys(CONSUMER_ANOMALIES, 0),
        "inconsistent_offset": 1,
    }
    (example,) = {c.name: c for c in verdict.checks}["inconsistent_offset"].examples
    assert (example["partition"], example["offset"], example["identities"]) == (0, 2, 2)
    assert naive.check(run.path).counts["inconsistent_offset"] == 1
    polls = [e for e in verdict.gx.expectations if e.anomalies == ["inconsistent_offset"]]
    assert [e.success for e in polls] == [False]
    assert verdict.gx.agrees_with_anomalies

    info = run.read_info()
    run.write_info(info.model_copy(update={"expected": {"inconsistent_offset": "0"}}))
    refused = verify_run(run.path, spark=spark)
    assert [(m.name, m.expected, m.observed) for m in refused.mismatches] == [
        ("inconsistent_offset", "0", 1)
    ]


@pytest.mark.parametrize(("assignment", "nonmonotonic"), [(2, 0), (1, 1)])
def test_a_partition_assigned_again_reads_from_its_committed_offset_in_an_epoch_of_its_own(
    spark: SparkSession, kafka_bootstrap: str, tmp_path: Path, assignment: int, nonmonotonic: int
) -> None:
    """c1 processes p0 0-3 and commits 2; its client loses p0 and assigns it again, reporting the
    same generation (Kafka's Java client 3.9.2 under KIP-848 did), and c1 reads from 2 again: a
    new assignment epoch, no nonmonotonic poll, only redeliveries. The same read back without
    the assignment is one (the control); Spark, GX and the naive checker agree either way."""
    planted = PlantedRun(root=tmp_path, bootstrap=kafka_bootstrap)
    _, messages = four_records(planted)
    consumption = PlantedConsumption(run_id=planted.run_id, mode="dedup-table")
    c1 = Member(consumer=0, session=uuid.uuid4().hex, generation=3)
    for offset, message in enumerate(messages):  # each through the handler: applied once
        consumption.process(c1, 0, offset, message, None)
    consumption.commit(c1, 0, 2)
    for offset in (2, 3):
        consumption.process(c1, 0, offset, messages[offset], None, assignment=assignment)
    consumption.commit(c1, 0, 4)
    expected: dict[str, object] = {
        "redelivered": ">0",
        "nonmonotonic_poll": "0" if nonmonotonic == 0 else ">0",
    }
    run, verdict, counts = judged(planted, consumption, expected, spark)
    assert counts == {
        **dict.fromkeys(CONSUMER_ANOMALIES, 0),
        "redelivered": 2,
        "nonmonotonic_poll": nonmonotonic,
    }
    assert naive.check(run.path).counts["nonmonotonic_poll"] == nonmonotonic
    polls = [e for e in verdict.gx.expectations if e.anomalies == ["nonmonotonic_poll"]]
    assert [e.success for e in polls] == [nonmonotonic == 0]
    assert verdict.gx.agrees_with_anomalies


def test_the_sink_is_read_from_postgresql_with_the_password_from_pgpassword(
    spark: SparkSession,
    planted: Planted,
    postgres_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same consumption, its effects in PostgreSQL: run.json names the sink without its
    password, the checker takes it from PGPASSWORD and finds the same anomalies."""
    run = RunDir(shutil.copytree(planted.pristine, tmp_path / "pg-run"))
    planted.consumption.write(run, postgres_url)
    sink = run.read_info().consumption.sink  # type: ignore[union-attr]
    assert sink.startswith("postgresql://eoslab@127.0.0.1:")
    assert urlsplit(sink).password is None
    monkeypatch.setenv(PASSWORD_VARIABLE, urlsplit(postgres_url).password or "")

    verdict = verify_run(run.path, spark=spark)

    assert verdict.conforms, verdict.mismatches
    metrics = json.loads(run.metrics_json.read_text())
    assert naive.check(run.path).counts == metrics["anomalies"]
    for name in CONSUMER_ANOMALIES:
        assert located(run, name, "partition", "offset") == located(
            planted.run, name, "partition", "offset"
        )
