"""The consumer workload end to end on the lab's Kafka: real librdkafka consumers in one group,
real SQLite and PostgreSQL sinks, real kill -9 and SIGSTOP; exact counts where the seeded halt
points make them exact."""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from confluent_kafka import Producer

from eoslab.admin import create_topic, end_offsets
from eoslab.clock import wait_until
from eoslab.run_context import RunContext
from eoslab.rundir import COMMITS_SCHEMA, PROCESSED_SCHEMA, RunDir, message_id, new_run_id
from eoslab.runtime.local import LocalRuntime
from eoslab.workload.consumer.sink.database import Sink
from eoslab.workload.consumer.spec import ConsumerWorkloadSpec
from eoslab.workload.consumer.workload import ConsumerWorkload
from lab_workloads import run_producers

pytestmark = pytest.mark.lab

RECORDS = 1200
PARTITIONS = 3
SEED = 5
CRASH_AT = 250
COMMIT_EVERY = 100
"""Crash after the 250th effect, commits after the 100th and 200th: 50 processed, uncommitted."""
WAIT_S = 90.0


@dataclass(frozen=True)
class Produced:
    run_id: str
    topic: str
    ends: dict[int, int]
    messages: frozenset[str]
    foreign: tuple[int, int]
    """(partition, offset) of the one record that is not the run's."""


def produce(
    bootstrap: str, run_dir: RunDir, run_id: str, topic: str, records: int = RECORDS
) -> set[str]:
    """The producer workload writes the run's records (eos1) and finishes (bounded); returns
    the identities of every record the run directory's history holds."""
    run_producers(
        bootstrap,
        run_dir,
        run_id,
        topic,
        records=records,
        partitions=PARTITIONS,
        seed=SEED,
        wait_s=WAIT_S,
    )
    history = ds.dataset(run_dir.history_dir).to_table().to_pylist()
    return {message_id(r["session_id"], r["partition"], r["seq"]) for r in history}


@pytest.fixture(scope="module")
def produced(lab: LocalRuntime, tmp_path_factory: pytest.TempPathFactory) -> Produced:
    """One topic for the tests that consume a finished stream: RECORDS workload records, then a
    foreign record at the end of partition 0."""
    bootstrap = lab.config.bootstrap_servers
    run_id = new_run_id("consumers", "kafka")
    topic = f"eos-{run_id}"
    create_topic(bootstrap, topic, PARTITIONS, 3)
    messages = produce(
        bootstrap, RunDir(tmp_path_factory.mktemp("producers") / run_id).create(), run_id, topic
    )
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    reports = []
    producer.produce(
        topic,
        b"not a workload record",
        partition=0,
        on_delivery=lambda e, m: reports.append((e, m)),
    )
    assert producer.flush(30) == 0
    [(error, record)] = reports
    assert error is None
    offset = record.offset()
    assert offset is not None
    ends = end_offsets(bootstrap, topic, PARTITIONS)
    assert sum(ends.values()) == RECORDS + 1
    return Produced(run_id, topic, ends, frozenset(messages), (0, offset))


@pytest.fixture
def consumers(lab: LocalRuntime, tmp_path: Path) -> Iterator[Any]:
    """Start a consumer workload on a topic: a fresh run directory, group and sink per call
    (tests share a topic, and so a run id); every workload is stopped at the end of the test."""
    started: list[ConsumerWorkload] = []

    def start(run_id: str, topic: str, **spec: Any) -> ConsumerWorkload:
        group = f"eoslab-test-{uuid.uuid4().hex[:8]}"
        workload = ConsumerWorkload(
            ConsumerWorkloadSpec(**{"idle_exit_s": 60.0, "group": group, **spec}),
            RunContext(
                run_id=run_id,
                run_dir=RunDir(tmp_path / f"run-{len(started)}").create(),
                target="kafka",
                lab_target="kafka",
                bootstrap=lab.config.bootstrap_servers,
                topic=topic,
                partitions=PARTITIONS,
                seed=SEED,
            ),
        )
        started.append(workload)
        workload.start()
        return workload

    yield start
    for workload in started:
        workload.stop()


def ledger(workload: ConsumerWorkload) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The sealed consumption ledger: processed rows, commit rows."""
    run_dir = workload.run_dir
    return (
        ds.dataset(run_dir.processed_dir, schema=PROCESSED_SCHEMA).to_table().to_pylist(),
        ds.dataset(run_dir.commits_dir, schema=COMMITS_SCHEMA).to_table().to_pylist(),
    )


def sink_rows(workload: ConsumerWorkload, query: str) -> list[tuple[Any, ...]]:
    sink = Sink(workload.sink)
    try:
        with sink.transaction() as tx:
            return tx.execute(query)
    finally:
        sink.close()


def effects_per_message(workload: ConsumerWorkload) -> Counter[str]:
    return Counter(
        dict(sink_rows(workload, "SELECT message_id, COUNT(*) FROM effects GROUP BY message_id"))
    )


def finish(workload: ConsumerWorkload, ends: dict[int, int]) -> None:
    assert workload.wait_caught_up(WAIT_S, ends), workload.committed_offsets()
    workload.stop()
    assert workload.finished
    assert workload.failures() == []


def only(rows: list[dict[str, Any]], **where: Any) -> list[dict[str, Any]]:
    return [r for r in rows if all(r[k] == v for k, v in where.items())]


# ------------------------------------------------------------------------------ every mode
@pytest.mark.parametrize("mode", ["auto-commit", "commit-after", "idempotent", "dedup-table"])
def test_every_handler_mode_applies_a_clean_stream_once(
    consumers: Any, produced: Produced, mode: str
) -> None:
    workload = consumers(produced.run_id, produced.topic, consumers=2, mode=mode)
    finish(workload, produced.ends)

    processed, commits = ledger(workload)
    workload_rows = [r for r in processed if r["effect"] != "foreign"]
    assert Counter(r["message_id"] for r in workload_rows) == Counter(produced.messages)
    assert {r["effect"] for r in workload_rows} == {"applied"}
    [foreign] = only(processed, effect="foreign")
    assert (foreign["partition"], foreign["offset"]) == produced.foreign
    assert all(r["generation"] >= 1 and r["member_id"].startswith("rdkafka-") for r in processed)

    assert effects_per_message(workload) == Counter(produced.messages)
    by_order = dict(sink_rows(workload, "SELECT apply_order, message_id FROM effects"))
    assert {r["apply_order"]: r["message_id"] for r in workload_rows} == by_order
    assert sink_rows(
        workload, "SELECT COUNT(*) FROM orders WHERE version <> last_key_seq + 1 OR invalid > 0"
    ) == [(0,)]

    assert commits
    assert {c["error"] for c in commits} == {None}
    if mode == "auto-commit":
        assert {c["trigger"] for c in commits} == {"auto"}
    else:
        last = {p: max(c["offset"] for c in only(commits, partition=p)) for p in produced.ends}
        assert last == produced.ends
    assert workload.info().mode == mode
    assert [s.consumer for s in workload.info().sessions] == [0, 1]


# ------------------------------------------------------------------------------ crash before commit
# commit-after on SQLite: through Airflow in tests/orchestration/test_dag_runs.py
@pytest.mark.parametrize(
    ("mode", "engine"),
    [
        ("idempotent", "sqlite"),
        ("dedup-table", "sqlite"),
        ("commit-after", "postgresql"),
        ("dedup-table", "postgresql"),
    ],
)
def test_a_crash_between_effects_and_commit_redelivers_what_was_not_committed(
    consumers: Any, produced: Produced, request: pytest.FixtureRequest, mode: str, engine: str
) -> None:
    sink = request.getfixturevalue("postgres_url") if engine == "postgresql" else None
    workload = consumers(
        produced.run_id,
        produced.topic,
        mode=mode,
        sink=sink,
        commit_every=COMMIT_EVERY,
        crash_after_effects={0: CRASH_AT},
    )
    assert workload.wait(WAIT_S)  # the session killed itself (-9) at its crash point
    [crashed] = workload.sessions
    assert workload.progress(0)["state"] == "crashing"
    assert workload.failures() == []

    # What the killed session journaled is in the ledger: every effect, and its two commits.
    processed, commits = ledger(workload)
    assert [r["n"] for r in processed] == list(range(CRASH_AT))
    assert {r["effect"] for r in processed} == {"applied"}
    assert sorted({c["commit"] for c in commits}) == [0, 1]
    assert {(c["trigger"], c["error"]) for c in commits} == {("every", None)}
    assert sink_rows(workload, "SELECT COUNT(*) FROM effects") == [(CRASH_AT,)]
    uncommitted = processed[2 * COMMIT_EVERY :]

    workload.restart(0)
    finish(workload, produced.ends)
    processed, _ = ledger(workload)
    second = only(processed, consumer_session=workload.sessions[1].session_id)
    first_ids = {r["message_id"] for r in processed if r["consumer_session"] == crashed.session_id}
    redelivered = [r for r in second if r["message_id"] in first_ids]
    assert len(redelivered) == CRASH_AT - 2 * COMMIT_EVERY
    assert {(r["partition"], r["offset"]) for r in redelivered} == {
        (r["partition"], r["offset"]) for r in uncommitted
    }

    effects = effects_per_message(workload)
    assert set(effects) == produced.messages
    doubled = {m for m, count in effects.items() if count == 2}
    if mode == "commit-after":  # the negative control: at-least-once applies them twice
        assert doubled == {r["message_id"] for r in uncommitted}
        assert {r["effect"] for r in redelivered} == {"applied"}
        assert max(effects.values()) == 2
    else:
        assert doubled == set()
        assert {r["effect"] for r in redelivered} == {"duplicate"}


def test_auto_commit_with_a_crash_loses_the_records_it_was_handed(
    consumers: Any, produced: Produced
) -> None:
    workload = consumers(
        produced.run_id, produced.topic, mode="auto-commit", crash_after_effects={0: CRASH_AT}
    )
    assert workload.wait(WAIT_S)
    at_crash = workload.progress(0)
    assert at_crash["state"] == "crashing"
    handed_out = {int(p): offset for p, offset in at_crash["received"].items()}
    committed = workload.committed_offsets()
    assert handed_out  # it crashed with records handed out: each committed past
    assert all(committed[p] == offset for p, offset in handed_out.items())  # committed past them
    assert at_crash["processed"] >= CRASH_AT  # the first effect from there with some left
    lost = sum(handed_out.values()) - at_crash["processed"]
    assert lost == at_crash["left_in_batch"] > 0  # the rest of its batch, never processed

    workload.restart(0)
    finish(workload, produced.ends)
    processed, _ = ledger(workload)
    seen = {(r["partition"], r["offset"]) for r in processed}
    never = sorted(
        (p, o) for p, end in produced.ends.items() for o in range(end) if (p, o) not in seen
    )
    assert len(never) == lost
    first = only(processed, consumer_session=workload.sessions[0].session_id)
    last_processed = {p: max(r["offset"] for r in first if r["partition"] == p) for p in handed_out}
    assert never == sorted(
        (p, o) for p, end in handed_out.items() for o in range(last_processed.get(p, -1) + 1, end)
    )
    assert sum(effects_per_message(workload).values()) == RECORDS - lost


# ------------------------------------------------------------------------------ the group
@pytest.fixture
def fresh_topic(lab: LocalRuntime, tmp_path: Path) -> tuple[str, str]:
    """An empty topic for tests whose consumers must all be in the group before records come."""
    run_id = new_run_id("group", "kafka")
    topic = f"eos-{run_id}"
    create_topic(lab.config.bootstrap_servers, topic, PARTITIONS, 3)
    return run_id, topic


def assigned(workload: ConsumerWorkload, consumer: int) -> set[int]:
    return set(workload.progress(consumer).get("assignment", []))


def split(workload: ConsumerWorkload, members: list[int]) -> bool:
    """Every partition assigned, to exactly one of ``members``, each holding some."""
    held = [assigned(workload, c) for c in members]
    return all(held) and sorted(p for h in held for p in h) == list(range(PARTITIONS))


def test_two_consumers_split_the_partitions(
    lab: LocalRuntime, consumers: Any, fresh_topic: tuple[str, str], tmp_path: Path
) -> None:
    run_id, topic = fresh_topic
    workload = consumers(run_id, topic, consumers=2, mode="commit-after")
    assert workload.wait_settled(WAIT_S)
    assert split(workload, [0, 1])
    messages = produce(
        lab.config.bootstrap_servers, RunDir(tmp_path / "producers").create(), run_id, topic
    )
    ends = workload.end_offsets()
    finish(workload, ends)

    processed, _ = ledger(workload)
    assert Counter(r["message_id"] for r in processed) == Counter(messages)
    partitions = {c: {r["partition"] for r in only(processed, consumer=c)} for c in (0, 1)}
    assert partitions[0]
    assert partitions[1]
    assert partitions[0].isdisjoint(partitions[1])
    # One generation: no rebalance after the split.
    assert len({r["generation"] for r in processed}) == 1


def test_a_rebalance_starts_a_consumers_idle_clock_again(
    consumers: Any, fresh_topic: tuple[str, str]
) -> None:
    """A consumer with nothing to read ends idle_exit_s after its last record or its last
    rebalance, whichever came later: a group that formed again (after its coordinator's outage,
    say) has records to hand out. coordinator-kill-at-least-once on the reference broker: both
    consumers ended 30 s after their last record, 7 s after the coordinator was back and before
    the group had formed again, and the control's crash found no consumer to crash."""
    idle_s = 8.0
    run_id, topic = fresh_topic
    workload = consumers(run_id, topic, consumers=1, mode="commit-after", idle_exit_s=idle_s)
    assert workload.wait_settled(WAIT_S)
    workload.join()  # the first consumer's partitions are revoked and assigned again
    assert workload.wait(WAIT_S)
    first = workload.sessions[0]
    log = workload.run_dir.consumer_log_file(first.session_id).read_text()
    # (its last line, "revoked", is its own close's)
    assigned = [int(at) for at in re.findall(r"^rebalance: assigned \[.*\] at (\d+)", log, re.M)]
    assert len(assigned) >= 2, log
    assert first.ended_ms is not None
    assert first.ended_ms - assigned[-1] >= idle_s * 1000


def test_a_consumer_paused_past_the_session_timeout_is_fenced_as_a_zombie(
    lab: LocalRuntime, consumers: Any, fresh_topic: tuple[str, str], tmp_path: Path
) -> None:
    """Consumer 0 stops itself (SIGSTOP) right after its 150th effect, before committing them;
    the coordinator gives its partitions to consumer 1, which processes them again; resumed, the
    zombie's commit in its old generation is refused. dedup-table: every effect once."""
    frozen_at = 150
    run_id, topic = fresh_topic
    workload = consumers(
        run_id,
        topic,
        consumers=2,
        mode="dedup-table",
        commit_every=frozen_at,
        freeze_after_effects={0: frozen_at},
    )
    assert workload.wait_settled(WAIT_S)
    assert split(workload, [0, 1])
    messages = produce(
        lab.config.bootstrap_servers, RunDir(tmp_path / "producers").create(), run_id, topic
    )
    assert wait_until(lambda: workload.progress(0).get("state") == "frozen", WAIT_S)
    zombie = workload.progress(0)
    assert zombie["applied"] == frozen_at
    # Past session.timeout.ms (6 s) the group rebalances without it.
    assert wait_until(lambda: assigned(workload, 1) == set(range(PARTITIONS)), WAIT_S)
    assert workload.progress(1)["generation"] > zombie["generation"]
    workload.resume(0)
    finish(workload, workload.end_offsets())

    processed, commits = ledger(workload)
    before = only(processed, consumer=0, generation=zombie["generation"])[:frozen_at]
    taken_over = {
        r["message_id"]: r for r in only(processed, consumer=1) if r["effect"] == "duplicate"
    }
    assert {r["message_id"] for r in before} <= set(taken_over)
    stale = only(commits, consumer=0, generation=zombie["generation"])
    assert stale
    assert {c["error"] for c in stale} & {"UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION"}
    assert None not in {c["error"] for c in stale}
    assert effects_per_message(workload) == Counter(messages)


def test_members_joining_pausing_and_leaving_never_double_an_effect(
    lab: LocalRuntime, consumers: Any, fresh_topic: tuple[str, str], tmp_path: Path
) -> None:
    """The supervisor's verbs one after the other, each a rebalance with a new generation:
    join, pause past the session timeout (while idle: no sink lock held), resume, leave.
    Records come before and during the pause; dedup-table keeps every effect single."""
    run_id, topic = fresh_topic
    bootstrap = lab.config.bootstrap_servers
    producers = RunDir(tmp_path / "producers").create()
    workload = consumers(run_id, topic, mode="dedup-table")
    everything = set(range(PARTITIONS))
    assert wait_until(lambda: assigned(workload, 0) == everything, WAIT_S)
    joined = workload.join()
    assert wait_until(lambda: split(workload, [0, joined]), WAIT_S)
    generations = [workload.progress(0)["generation"]]
    produce(bootstrap, producers, run_id, topic, records=RECORDS // 2)
    assert workload.wait_caught_up(WAIT_S)

    workload.pause(joined)
    assert wait_until(lambda: assigned(workload, 0) == everything, WAIT_S)
    generations.append(workload.progress(0)["generation"])
    messages = produce(bootstrap, producers, run_id, topic, records=RECORDS // 2)
    assert workload.wait_caught_up(WAIT_S)
    workload.resume(joined)
    assert wait_until(lambda: split(workload, [0, joined]), WAIT_S)
    generations.append(workload.progress(0)["generation"])
    workload.leave(joined)
    assert wait_until(lambda: assigned(workload, 0) == everything, WAIT_S)
    generations.append(workload.progress(0)["generation"])
    finish(workload, workload.end_offsets())

    assert generations == sorted(set(generations))
    effects = effects_per_message(workload)
    assert set(effects) == messages
    assert len(messages) == RECORDS
    assert set(effects.values()) == {1}
    processed, _ = ledger(workload)
    assert {r["partition"] for r in only(processed, consumer=joined)}
    left = workload.sessions[-1]
    assert (left.consumer, left.ended_ms is not None) == (joined, True)


def test_the_ledger_of_a_consumer_killed_at_any_moment_matches_its_effects(
    consumers: Any, produced: Produced
) -> None:
    """A kill -9 from outside, mid-stream: the sealed ledger of the killed session holds every
    effect it made (but for the one whose transaction had just committed, at most)."""
    workload = consumers(produced.run_id, produced.topic, mode="commit-after", batch=10)
    assert wait_until(lambda: workload.total("processed") >= 300, WAIT_S)
    killed = workload.crash(0)
    processed, _ = ledger(workload)
    journaled = {r["apply_order"] for r in processed if r["effect"] == "applied"}
    landed = {
        order
        for (order,) in sink_rows(
            workload,
            f"SELECT apply_order FROM effects WHERE consumer_session = '{killed.session_id}'",
        )
    }
    assert journaled <= landed
    assert len(landed - journaled) <= 1
    assert len(journaled) >= 300
    workload.restart(0)
    finish(workload, produced.ends)
    assert set(effects_per_message(workload)) == produced.messages
