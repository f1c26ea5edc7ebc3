"""The history ledger: outcome mapping, part files, and settling a killed session (killed on
purpose, or by the workload's stop when it outlasts its grace)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.dataset as ds
import pytest

from eoslab.clock import wait_until
from eoslab.run_context import RunContext
from eoslab.rundir import HISTORY_SCHEMA, Outcome, RunDir
from eoslab.workload import supervisor
from eoslab.workload.producer.history import (
    HistoryWriter,
    SendJournal,
    read_journal,
    settle_killed_session,
)
from eoslab.workload.producer.outcomes import PRODUCER_KILLED, outcome_of
from eoslab.workload.producer.plan import KeySpace, RecordStream
from eoslab.workload.spec import WorkloadSpec


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (None, Outcome.ACK),
        ("_QUEUE_FULL", Outcome.FAIL),
        ("_MSG_SIZE_TOO_LARGE", Outcome.FAIL),
        ("MSG_SIZE_TOO_LARGE", Outcome.FAIL),
        ("_PURGE_QUEUE", Outcome.UNSENT),
        ("_PURGE_INFLIGHT", Outcome.INDETERMINATE),
        ("_MSG_TIMED_OUT", Outcome.INDETERMINATE),
        ("OUT_OF_ORDER_SEQUENCE_NUMBER", Outcome.INDETERMINATE),
        ("NOT_ENOUGH_REPLICAS", Outcome.INDETERMINATE),
        (PRODUCER_KILLED, Outcome.INDETERMINATE),
    ],
)
def test_error_to_outcome(error: str | None, outcome: Outcome) -> None:
    assert outcome_of(error) is outcome


@pytest.fixture
def run_dir(tmp_path: Path) -> RunDir:
    return RunDir(tmp_path / "run-1").create()


def test_rows_are_flushed_into_part_files_of_the_contract_schema(run_dir: RunDir) -> None:
    writer = HistoryWriter(run_dir, "run-1", "s1", 0, flush_rows=2)
    for seq in range(5):
        writer.add(
            partition=0,
            seq=seq,
            key="k0",
            key_seq=seq,
            send_ms=10 + seq,
            outcome=Outcome.ACK,
            offset=seq,
            ack_ms=20 + seq,
            latency_ms=10.0,
        )
        writer.maybe_flush()
    assert writer.pending == 1
    writer.flush()
    files = sorted(p.name for p in run_dir.history_dir.iterdir())
    assert files == [f"p0-s1-{part:05d}.parquet" for part in range(3)]
    table = ds.dataset(run_dir.history_dir).to_table()
    assert table.schema.equals(HISTORY_SCHEMA)
    assert sorted(table.column("seq").to_pylist()) == [0, 1, 2, 3, 4]


def test_a_killed_session_leaves_its_unreported_sends_indeterminate(run_dir: RunDir) -> None:
    journal = SendJournal(run_dir.journal_file("s1"))
    for seq in range(4):
        journal.record(1, seq, f"k{seq}", 0, 100 + seq)
    journal.close()
    with run_dir.journal_file("s1").open("ab") as torn:
        torn.write(b"1\t4\tk4")  # killed in the middle of a line: never produced
    writer = HistoryWriter(run_dir, "run-1", "s1", 2)
    writer.add(partition=1, seq=0, key="k0", key_seq=0, send_ms=100, outcome=Outcome.ACK, offset=7)
    writer.flush()

    assert [e.seq for e in read_journal(run_dir.journal_file("s1"))] == [0, 1, 2, 3]
    assert settle_killed_session(run_dir, "run-1", "s1", 2) == 3
    rows = ds.dataset(run_dir.history_dir).to_table().to_pylist()
    by_seq = {row["seq"]: row for row in rows}
    assert sorted(by_seq) == [0, 1, 2, 3]
    assert by_seq[0]["outcome"] == "ack"
    for seq in (1, 2, 3):
        assert by_seq[seq]["outcome"] == "indeterminate"
        assert by_seq[seq]["error"] == PRODUCER_KILLED
        assert by_seq[seq]["offset"] is None
        assert by_seq[seq]["send_ms"] == 100 + seq


def test_a_session_the_stop_must_kill_leaves_its_sends_indeterminate(
    run_dir: RunDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real producer session (librdkafka) whose broker never answers: every send waits, and
    the stop's SIGTERM lets it wait out its flush (30 s) past the grace (0.5 s here), so the
    stop kills it; what it journaled gets an outcome all the same, not a phantom's silence."""
    monkeypatch.setattr(supervisor, "STOP_GRACE_S", 0.5)
    context = RunContext(
        run_id="run-1",
        run_dir=run_dir,
        target="kafka",
        lab_target="kafka",
        bootstrap="127.0.0.1:9",  # the discard port: nothing listens on loopback
        topic="t",
        partitions=3,
        seed=0,
    )
    workload = supervisor.Workload(WorkloadSpec(records=20), context, {"acks": "all"})
    workload.start()
    (session,) = workload.sessions
    journal = run_dir.journal_file(session.session_id)
    assert wait_until(lambda: len(read_journal(journal)) == 20, 30, 0.05)
    workload.stop()
    assert workload.finished
    rows = ds.dataset(run_dir.history_dir).to_table().to_pylist()
    assert sorted(row["seq"] for row in rows) == sorted(e.seq for e in read_journal(journal))
    assert {(row["outcome"], row["error"]) for row in rows} == {("indeterminate", PRODUCER_KILLED)}
    assert workload.failures() == []  # stopped by its supervisor: no failure of its own


def test_the_record_stream_is_seeded_and_keeps_a_key_on_one_partition() -> None:
    keys = KeySpace(10, 3, seed=7)
    first = [RecordStream(keys, 7, 0, 0).next() for _ in range(1)]
    one, two = RecordStream(keys, 7, 0, 0), RecordStream(keys, 7, 0, 0)
    records = [one.next() for _ in range(500)]
    assert records == [two.next() for _ in range(500)]
    assert records[0] == first[0]
    assert records != [RecordStream(keys, 7, 0, 1).next() for _ in range(500)]
    partition_of_key: dict[str, int] = {}
    for record in records:
        assert partition_of_key.setdefault(record.key, record.partition) == record.partition
    assert set(partition_of_key.values()) == {0, 1, 2}
    per_partition: dict[int, int] = {}
    for record in records:
        assert record.seq == per_partition.get(record.partition, 0)
        per_partition[record.partition] = record.seq + 1
