"""The workload as a whole: P producer processes, their sessions, crashes and restarts.

Each producer index runs one session at a time, a `python -m eoslab.workload.producer.session`
process. A crash is a real kill -9; the killed session's in-flight records are then settled
as indeterminate, and a restart starts a new session (a new session id, a new PID from the
broker) that sends what is left of the producer's share.

With ``transactions`` in the spec the sessions are transactional
(``python -m eoslab.workload.transactions.session``): producer ``i`` has the transactional id
:func:`transactional_id` in every session, so a restart fences the session before it, and
whenever a session ends, however it ends, its transaction journal is sealed into the ledger.

A transactional session can also be made a zombie (:meth:`Workload.freeze_mid_transaction`,
:meth:`Workload.take_over`, :meth:`Workload.resume`): frozen inside an open transaction while a
newer session of the same producer runs beside it. The newer session takes what is left of the
share but for every record of the transactions the frozen one began (it sends the rest of its
open transaction when resumed, and begins no other: :mod:`eoslab.workload.transactions.session`).
"""

from __future__ import annotations

import signal
import time
import uuid
from typing import Any

from eoslab.clock import now_ms, wait_until
from eoslab.run_context import RunContext
from eoslab.rundir import SessionInfo
from eoslab.workload.producer.history import read_journal, settle_killed_session
from eoslab.workload.producer.session import SessionSpec
from eoslab.workload.sessions import Session, SessionProcess, SessionTable, stop_all
from eoslab.workload.spec import WorkloadSpec
from eoslab.workload.transactions.journal import (
    begun_records,
    open_transaction,
    read_events,
    seal_transactions,
    unsettled_transaction,
)
from eoslab.workload.transactions.session import ARM_FREEZE, FROZEN

STOP_GRACE_S = 10.0
READY_TIMEOUT_S = 60.0
"""How long the start waits for every session's client to be made (its first progress line)."""
ARM_TIMEOUT_S = 10.0
"""How long an armed freeze point may wait for the session's next transaction in the log."""


def transactional_id(run_id: str, producer: int) -> str:
    """Producer ``producer``'s transactional id in run ``run_id`` (the same in every session)."""
    return f"eos-{run_id}-p{producer}"


class WorkloadError(RuntimeError):
    """The workload cannot do what was asked (e.g. crash a producer that is not running)."""


class Workload:
    def __init__(
        self,
        spec: WorkloadSpec,
        context: RunContext,
        producer_config: dict[str, str | int | float | bool],
    ) -> None:
        self.spec = spec
        self.context = context
        self.run_dir = context.run_dir
        self.run_id = context.run_id
        self.producer_config = producer_config
        self._sessions: SessionTable[SessionInfo] = SessionTable(
            "producer", spec.producers, WorkloadError
        )
        self._started_at: float | None = None

    # ---------------------------------------------------------------- lifecycle
    def start(self, *, warm: bool = False) -> None:
        """Start every producer and return once each has made its client (bounded): the
        timeline's clock starts with clients that can send, whatever their start-up takes.
        ``warm``: once each has its first record's outcome too (a warm start,
        :mod:`eoslab.workload.producer.session`): the clock starts with a workload that flows."""
        launched = [self._launch(producer, warm) for producer in range(self.spec.producers)]
        wait_until(
            lambda: all(s.process.progress or not s.process.running for s in launched),
            READY_TIMEOUT_S,
            0.02,
        )
        self._started_at = time.monotonic()

    def crash(self, producer: int) -> tuple[SessionInfo, int]:
        """kill -9 the producer's running session; settle its in-flight records (how many)."""
        session = self._sessions.current(producer)
        if session is None or not session.process.running:
            raise WorkloadError(f"producer {producer} has no running session to crash")
        session.process.kill(STOP_GRACE_S)
        in_flight = settle_killed_session(
            self.run_dir, self.run_id, session.info.session_id, producer
        )
        return session.info, in_flight

    def restart(self, producer: int) -> SessionInfo:
        """A new session for what is left of the producer's share (nothing if all was sent)."""
        current = self._sessions.current(producer)
        if current is not None and current.process.running:
            raise WorkloadError(f"producer {producer} is still running")
        return self._launch(producer).info

    def freeze_mid_transaction(
        self, producer: int, timeout_s: float = ARM_TIMEOUT_S
    ) -> tuple[SessionInfo, dict[str, Any] | None]:
        """Arm the running transactional session's freeze point: it stops itself (SIGSTOP) in
        an open transaction with a record acknowledged, before that transaction's commit or
        abort is asked for. Returns the session and, once it has frozen, its progress line then
        (``open_txn``, ``producer_id``, ``producer_epoch``); None if it did not freeze within
        ``timeout_s`` (it ended first, or no record of a transaction was acknowledged)."""
        if self.spec.transactions is None:
            raise WorkloadError("only a transactional session freezes mid-transaction")
        session = self._sessions.current(producer)
        if session is None or not session.process.running:
            raise WorkloadError(f"producer {producer} has no running session to freeze")
        session.process.signal(ARM_FREEZE)
        wait_until(lambda: self._frozen(session) or not session.process.running, timeout_s, 0.05)
        return session.info, dict(session.process.progress) if self._frozen(session) else None

    def take_over(self, producer: int) -> SessionInfo:
        """A new session of the producer while its current one is frozen mid-transaction (the
        same transactional id: its init_transactions fences the frozen one)."""
        current = self._sessions.current(producer)
        if current is None or not self._frozen(current):
            raise WorkloadError(f"producer {producer} has no frozen session to take over from")
        return self._launch(producer).info

    def resume(self, session_id: str) -> None:
        """SIGCONT a session (a frozen one wakes up; a running one does not notice)."""
        self._session(session_id).process.signal(signal.SIGCONT)

    def await_end(self, session_id: str, timeout_s: float) -> SessionInfo | None:
        """The session once it has ended (its on-exit accounting done), None after the timeout."""
        session = self._session(session_id)
        return session.info if wait_until(lambda: session.process.finished, timeout_s) else None

    def progress(self, session_id: str) -> dict[str, Any]:
        """The session's last progress line."""
        return dict(self._session(session_id).process.progress)

    @property
    def transactional(self) -> bool:
        return self.spec.transactions is not None

    def open_transaction(self, session_id: str) -> dict[str, Any] | None:
        """The session's transaction left open (begun, no commit or abort asked for), from its
        journal; None if there is none or the workload is not transactional."""
        return open_transaction(read_events(self.run_dir.txn_journal_file(session_id)))

    def unsettled_transaction(self, producer: int) -> dict[str, Any] | None:
        """The transaction the producer's current session has begun and not settled (open, or
        its commit or abort under way: what its coordinator holds), from its journal; None if
        there is none."""
        session = self._sessions.current(producer)
        if session is None or self.spec.transactions is None:
            return None
        events = read_events(self.run_dir.txn_journal_file(session.info.session_id))
        return unsettled_transaction(events)

    def transaction_begun(self, session_id: str, txn: int) -> dict[str, Any] | None:
        """The session's transaction ``txn`` as it was begun (its journal's ``begin`` event:
        ``records`` as [partition, seq, key, key_seq], ``begin_ms``), None if it never was."""
        return _event(read_events(self.run_dir.txn_journal_file(session_id)), "begin", txn)

    def transaction_settled(self, session_id: str, txn: int) -> dict[str, Any] | None:
        """How the session's transaction ``txn`` was settled (its journal's ``settled`` event:
        outcome, error, producer id and epoch), None if it never was."""
        return _event(read_events(self.run_dir.txn_journal_file(session_id)), "settled", txn)

    def stop(self) -> None:
        """SIGTERM every running session (they finish cleanly), SIGKILL after a grace. A session
        the stop had to kill (a run cut at its time bound while a send still waited for the
        broker) has its in-flight records settled indeterminate, as a crash's: sent, and no
        outcome the checker could otherwise tell from a record never sent."""
        stop_all((s.process for s in self._sessions.all()), STOP_GRACE_S)
        for session in self._sessions.all():
            process = session.process
            if process.stopped and not process.killed and process.returncode == -signal.SIGKILL:
                settle_killed_session(
                    self.run_dir, self.run_id, session.info.session_id, session.info.producer
                )

    def wait(self, timeout_s: float, poll_s: float = 0.1) -> bool:
        """Until every session has exited (True) or the timeout (False)."""
        return bool(wait_until(lambda: self.finished, timeout_s, poll_s))

    # ---------------------------------------------------------------- views
    @property
    def finished(self) -> bool:
        return all(s.process.finished for s in self._sessions.all())

    @property
    def acked(self) -> int:
        return sum(int(s.process.progress.get("ack", 0)) for s in self._sessions.all())

    @property
    def settled(self) -> int:
        """Records with a final outcome so far (ack, fail, indeterminate, unsent)."""
        outcomes = ("ack", "fail", "indeterminate", "unsent")
        return sum(
            int(s.process.progress.get(o, 0)) for s in self._sessions.all() for o in outcomes
        )

    @property
    def transactional_ids(self) -> list[str]:
        """Each producer's transactional id (empty unless the producers are transactional)."""
        if self.spec.transactions is None:
            return []
        return [transactional_id(self.run_id, p) for p in range(self.spec.producers)]

    @property
    def sessions(self) -> list[SessionInfo]:
        return sorted(
            (s.info for s in self._sessions.all()), key=lambda i: (i.started_ms, i.producer)
        )

    def failures(self) -> list[str]:
        """Sessions that exited abnormally without being crashed on purpose."""
        return self._sessions.failures()

    # ---------------------------------------------------------------- internals
    @staticmethod
    def _frozen(session: Session[SessionInfo]) -> bool:
        return bool(session.process.running and session.process.progress.get("state") == FROZEN)

    def _session(self, session_id: str) -> Session[SessionInfo]:
        found = [s for s in self._sessions.all() if s.info.session_id == session_id]
        if not found:
            raise WorkloadError(f"no producer session {session_id}")
        return found[0]

    def _claimed(self, session: Session[SessionInfo]) -> int:
        """How much of its producer's share a session took: the records it sent; while it is
        alive (a frozen zombie), at least every record of the transactions it began, since it
        still sends the rest of its open one (and begins no other)."""
        session_id = session.info.session_id
        sent = len(read_journal(self.run_dir.journal_file(session_id)))
        if self.spec.transactions is None or not session.process.running:
            return sent
        return max(sent, begun_records(read_events(self.run_dir.txn_journal_file(session_id))))

    def _remaining(self, producer: int) -> tuple[int | None, float | None]:
        sent = sum(self._claimed(s) for s in self._sessions.of(producer))
        share = self.spec.records_of(producer)
        records = None if share is None else max(0, share - sent)
        duration = self.spec.duration_s
        if duration is not None and self._started_at is not None:
            duration = max(0.001, duration - (time.monotonic() - self._started_at))
        return records, duration

    def _launch(self, producer: int, warm: bool = False) -> Session[SessionInfo]:
        records, duration = self._remaining(producer)
        session_id = uuid.uuid4().hex
        session_index = len(self._sessions.of(producer))
        spec = SessionSpec(
            run_dir=self.run_dir.path,
            run_id=self.run_id,
            session_id=session_id,
            producer=producer,
            session_index=session_index,
            bootstrap=self.context.bootstrap,
            topic=self.context.topic,
            partitions=self.context.partitions,
            config=self.producer_config,
            records=records,
            duration_s=duration,
            rate=self.spec.rate_per_producer,
            value_size=self.spec.value_size,
            keys=self.spec.keys,
            seed=self.context.seed,
            flush_timeout_s=self.spec.flush_timeout_s,
            transactions=self.spec.transactions,
            transactional_id=(
                None if self.spec.transactions is None else self.transactional_ids[producer]
            ),
            client=self.context.client,
            warm_start=warm,
        )
        info = SessionInfo(session_id=session_id, producer=producer, started_ms=now_ms())

        def ended(process: SessionProcess) -> None:
            info.ended_ms = now_ms()
            info.fatal = process.progress.get("fatal")
            info.fatal_reason = process.progress.get("fatal_reason")
            info.unsent = int(process.progress.get("unsent") or 0)
            info.epoch_bumps = int(process.progress.get("epoch_bumps") or 0)
            if spec.transactional_id is not None:
                seal_transactions(
                    self.run_dir, self.run_id, session_id, producer, spec.transactional_id
                )

        session = Session(
            info,
            SessionProcess(
                "eoslab.workload.producer.session"
                if spec.transactions is None
                else "eoslab.workload.transactions.session",
                spec.model_dump_json(),
                self.run_dir.journal_dir / f"{session_id}.log",
                on_exit=ended,
                client=self.context.client,
            ),
        )
        self._sessions.add(producer, session)
        return session


def _event(events: list[dict[str, Any]], kind: str, txn: int) -> dict[str, Any] | None:
    """Transaction ``txn``'s event of ``kind`` in a session's journal, None if there is none."""
    return next((e for e in events if e["event"] == kind and e["txn"] == txn), None)
