"""The copier stage as a whole: W copier processes in one group copying the run's topic to
``<topic>.copy`` (consume-transform-produce, issue 21).

Each worker index runs one session at a time, a ``python -m eoslab.workload.copy.session`` process:
a new session id and a new group member on every start, the same transactional id
(:func:`copier_transactional_id`) in every session, so a new session fences the one before it
and the coordinator aborts what that one left open. A session that killed itself at its seeded
crash point (``crash_after_batches``), or because a librdkafka call of it hung (its watchdog,
:mod:`eoslab.workload.copy.session`), or that ended on a commit whose outcome its client could
not confirm, is followed by a new session of its worker at once.
Whenever a session's process ends, however it ends, its journal is sealed into the copier
ledger.

The copiers run beside the producers; :meth:`CopierWorkload.finish` (once the producers are done
and the input has no transaction open) asks each to copy on to the end and exit, bounded.
"""

from __future__ import annotations

import signal
import time
import uuid

from confluent_kafka import KafkaException

from eoslab.admin import committed_offsets
from eoslab.clock import now_ms
from eoslab.run_context import RunContext
from eoslab.rundir import CopierSessionInfo, CopyInfo
from eoslab.workload.copy.journal import seal_copier
from eoslab.workload.copy.session import CopierSpec
from eoslab.workload.sessions import Session, SessionProcess, SessionTable, stop_all
from eoslab.workload.spec import CopySpec

OFFSETS_TIMEOUT_S = 10.0
STOP_GRACE_S = 5.0


def output_topic(topic: str) -> str:
    """The copier's output topic for input ``topic``."""
    return f"{topic}.copy"


def copier_transactional_id(run_id: str, worker: int) -> str:
    """Copier ``worker``'s transactional id in run ``run_id`` (the same in every session)."""
    return f"eos-{run_id}-copier{worker}"


class CopierWorkloadError(RuntimeError):
    """The copier stage cannot do what was asked."""


class CopierWorkload:
    def __init__(self, spec: CopySpec, context: RunContext) -> None:
        self.spec = spec
        self.context = context
        self.run_dir = context.run_dir
        self.group = f"eoslab-{context.run_id}-copier"
        self.output_topic = output_topic(context.topic)
        self._sessions: SessionTable[CopierSessionInfo] = SessionTable(
            "copier", spec.workers, CopierWorkloadError
        )
        self._finishing = False

    @property
    def transactional_ids(self) -> list[str]:
        if not self.spec.transactional:
            return []
        return [copier_transactional_id(self.context.run_id, w) for w in range(self.spec.workers)]

    def start(self) -> None:
        self.run_dir.copier_dir.mkdir(parents=True, exist_ok=True)
        for worker in range(self.spec.workers):
            self._launch(worker, self.spec.crash_after_batches.get(worker))

    def finish(self) -> bool:
        """Ask every session to copy on to the end and exit (SIGTERM; a session that replaces
        one from now on starts finishing), SIGKILL what is left after the spec's
        ``finish_timeout_s``; whether every session ended by itself."""
        self._finishing = True
        deadline = time.monotonic() + self.spec.finish_timeout_s
        while time.monotonic() < deadline and not self._finished():
            for session in self._sessions.all():
                if session.process.running and not session.process.stopped:
                    session.process.stopped = True
                    session.process.signal(signal.SIGTERM)
            time.sleep(0.1)
        ended_by_itself = self._finished()
        stop_all((s.process for s in self._sessions.all()), STOP_GRACE_S)
        return ended_by_itself

    def _finished(self) -> bool:
        return all(s.process.finished for s in self._sessions.all())

    def committed_offsets(self) -> dict[int, int]:
        """The copier group's committed offset per input partition (never committed: left
        out), from its coordinator; empty when it does not answer."""
        try:
            return committed_offsets(
                self.context.bootstrap,
                self.group,
                self.context.topic,
                self.context.partitions,
                OFFSETS_TIMEOUT_S,
            )
        except KafkaException:
            return {}

    def info(self) -> CopyInfo:
        """run.json's ``copier``."""
        return CopyInfo(
            output_topic=self.output_topic,
            group=self.group,
            workers=self.spec.workers,
            records_per_transaction=self.spec.records_per_transaction,
            transactional=self.spec.transactional,
            transactional_ids=self.transactional_ids,
            sessions=sorted(
                (s.info for s in self._sessions.all()), key=lambda i: (i.started_ms, i.worker)
            ),
            committed_offsets=self.committed_offsets(),
        )

    def failures(self) -> list[str]:
        """Sessions that exited abnormally, not at their own crash point."""
        return self._sessions.failures()

    def _launch(self, worker: int, crash_after_batches: int | None) -> Session[CopierSessionInfo]:
        """A new session of ``worker`` (finishing from its start once the stage finishes)."""
        session_id = uuid.uuid4().hex
        spec = CopierSpec(
            run_dir=self.run_dir.path,
            run_id=self.context.run_id,
            session_id=session_id,
            worker=worker,
            bootstrap=self.context.bootstrap,
            input_topic=self.context.topic,
            output_topic=self.output_topic,
            group=self.group,
            transactional_id=(
                copier_transactional_id(self.context.run_id, worker)
                if self.spec.transactional
                else None
            ),
            records_per_transaction=self.spec.records_per_transaction,
            call_timeout_s=self.spec.call_timeout_s,
            crash_after_batches=crash_after_batches,
            finishing=self._finishing,
            client=self.context.client,
        )
        info = CopierSessionInfo(session_id=session_id, worker=worker, started_ms=now_ms())

        def ended(process: SessionProcess) -> None:
            seal_copier(
                self.run_dir, self.context.run_id, worker, session_id, spec.transactional_id
            )
            info.ended_ms = now_ms()
            info.crashed = process.crashed_on_purpose
            info.hung_in = process.progress.get("hung_in") if info.crashed else None
            info.unconfirmed_commit = process.progress.get("unconfirmed_commit")
            if info.crashed or info.unconfirmed_commit:
                self._launch(worker, None)

        session = Session(
            info,
            SessionProcess(
                "eoslab.workload.copy.session",
                spec.model_dump_json(),
                self.run_dir.copier_log_file(session_id),
                on_exit=ended,
                client=self.context.client,
            ),
        )
        session.process.stopped = spec.finishing  # asked to finish from its start
        self._sessions.add(worker, session)
        return session
