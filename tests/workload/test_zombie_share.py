"""A zombie's share: while a transactional session is frozen (alive), a new session of its
producer gets what is left of the share but for every record of the transactions the frozen
one began (it still sends the rest of its open one when resumed); once it has ended, what it
sent is what it took."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from eoslab.run_context import RunContext
from eoslab.rundir import RunDir, SessionInfo
from eoslab.workload.producer.history import SendJournal
from eoslab.workload.producer.plan import PlannedRecord
from eoslab.workload.sessions import Session
from eoslab.workload.spec import TransactionSpec, WorkloadSpec
from eoslab.workload.supervisor import Workload, WorkloadError
from eoslab.workload.transactions.journal import COMMIT, TransactionJournal


@dataclass
class StoppedProcess:
    """A session process as the share sees it: alive (frozen) or ended."""

    running: bool


def workload(tmp_path: Path, *, transactional: bool) -> Workload:
    run_dir = RunDir(tmp_path / "run").create().create_transactions()
    context = RunContext(
        run_id=run_dir.run_id,
        run_dir=run_dir,
        target="kafka",
        lab_target="kafka",
        bootstrap="127.0.0.1:1",
        topic="t",
        partitions=3,
        seed=0,
    )
    transactions = TransactionSpec(records_per_transaction=20) if transactional else None
    return Workload(WorkloadSpec(records=100, transactions=transactions), context, {})


def zombie(workload: Workload, *, sent: int, begun: list[int], running: bool) -> None:
    """Session "z" of producer 0: ``sent`` records sent, transactions of ``begun`` records."""
    sends = SendJournal(workload.run_dir.journal_file("z"))
    for seq in range(sent):
        sends.record(0, seq, f"k{seq}", 0, send_ms=seq)
    sends.close()
    journal = TransactionJournal(workload.run_dir.txn_journal_file("z"))
    first = 0
    for txn, size in enumerate(begun):
        records = [PlannedRecord(0, seq, f"k{seq}", 0) for seq in range(first, first + size)]
        journal.begin(txn, COMMIT, records, begin_ms=txn)
        first += size
    journal.close()
    info = SessionInfo(session_id="z", producer=0, started_ms=0)
    workload._sessions.add(0, Session(info, StoppedProcess(running)))  # type: ignore[arg-type]


def test_a_frozen_zombie_keeps_its_open_transaction_and_the_successor_the_rest(
    tmp_path: Path,
) -> None:
    frozen = workload(tmp_path / "frozen", transactional=True)
    zombie(frozen, sent=45, begun=[20, 20, 20], running=True)  # frozen 5 into its third
    assert frozen._remaining(0) == (40, None)
    ended = workload(tmp_path / "ended", transactional=True)
    zombie(ended, sent=45, begun=[20, 20, 20], running=False)  # killed: 15 never sent
    assert ended._remaining(0) == (55, None)


def test_only_a_transactional_session_freezes_mid_transaction(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="only a transactional session"):
        workload(tmp_path, transactional=False).freeze_mid_transaction(0)
