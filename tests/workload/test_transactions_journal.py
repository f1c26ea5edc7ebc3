"""The transactions journal: a session's journal sealed into Parquet, with the outcome of every
transaction, including those a kill -9 left without an answer."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from eoslab.rundir import TRANSACTIONS_SCHEMA, RunDir, TxnOutcome
from eoslab.workload.producer.outcomes import PRODUCER_KILLED
from eoslab.workload.producer.plan import PlannedRecord
from eoslab.workload.transactions.journal import (
    ABORT,
    COMMIT,
    TransactionJournal,
    abort_outcome,
    seal_transactions,
)


def run_dir(tmp_path: Path) -> RunDir:
    return RunDir(tmp_path / "run").create().create_transactions()


def records(*seqs: int) -> list[PlannedRecord]:
    return [PlannedRecord(seq % 2, seq, f"k{seq}", 0) for seq in seqs]


def test_a_journal_is_sealed_with_every_outcome(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    journal = TransactionJournal(run.txn_journal_file("s1"))
    journal.begin(0, COMMIT, records(0, 1), begin_ms=100)
    journal.ending(0, True, 150)
    journal.settled(
        0, TxnOutcome.COMMITTED, error=None, settled_ms=160, producer_id=4, producer_epoch=2
    )
    journal.begin(1, ABORT, records(2), begin_ms=200)
    journal.ending(1, False, 250)
    journal.settled(
        1, TxnOutcome.ABORTED, error=None, settled_ms=260, producer_id=4, producer_epoch=2
    )
    journal.begin(2, COMMIT, records(3, 4), begin_ms=300)
    journal.ending(2, True, 350)  # killed while the commit was asked for
    journal.begin(3, COMMIT, records(5), begin_ms=400)  # killed before asking for the commit
    journal.close()

    assert seal_transactions(run, "r", "s1", 0, "tid-0") == 4
    table = pq.read_table(run.transactions_file(0, "s1"))
    assert table.schema == TRANSACTIONS_SCHEMA
    rows = table.to_pylist()
    assert [(r["txn"], r["outcome"], r["error"]) for r in rows] == [
        (0, "committed", None),
        (1, "aborted", None),
        (2, "indeterminate", PRODUCER_KILLED),
        (3, "aborted", PRODUCER_KILLED),
    ]
    assert rows[0]["records"] == [
        {"partition": 0, "seq": 0, "key": "k0", "key_seq": 0},
        {"partition": 1, "seq": 1, "key": "k1", "key_seq": 0},
    ]
    assert (rows[2]["end_ms"], rows[2]["settled_ms"], rows[3]["end_ms"]) == (350, None, None)
    assert {(r["producer_id"], r["producer_epoch"], r["transactional_id"]) for r in rows} == {
        (4, 2, "tid-0")
    }


def test_a_torn_last_line_never_happened(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    journal = TransactionJournal(run.txn_journal_file("s2"))
    journal.begin(0, COMMIT, records(0), begin_ms=100)
    journal.close()
    with run.txn_journal_file("s2").open("ab") as torn:
        torn.write(b'{"event":"ending","txn":0,"com')
    assert seal_transactions(run, "r", "s2", 1, "tid-1") == 1
    (row,) = pq.read_table(run.transactions_file(1, "s2")).to_pylist()
    assert (row["outcome"], row["end_ms"]) == ("aborted", None)


def test_an_abort_is_aborted_unless_it_failed_after_a_commit_was_asked_for() -> None:
    assert abort_outcome(commit_asked=False, abort_failed=False) is TxnOutcome.ABORTED
    assert abort_outcome(commit_asked=False, abort_failed=True) is TxnOutcome.ABORTED
    assert abort_outcome(commit_asked=True, abort_failed=False) is TxnOutcome.ABORTED
    assert abort_outcome(commit_asked=True, abort_failed=True) is TxnOutcome.INDETERMINATE
