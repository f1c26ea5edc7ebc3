"""The consumer workload as a whole: C consumer processes in one group, and what befalls them.

Each consumer index runs one session at a time, a ``python -m eoslab.workload.consumer.session``
process: a new session id and a new group member on every start. The nemesis acts on them
as on real applications: ``crash`` (kill -9), ``pause``/``resume`` (SIGSTOP/SIGCONT: past
session.timeout.ms the coordinator gives the partitions away and the member comes back a
zombie), ``join`` (one more member) and ``leave`` (a clean close); ``restart`` starts a new
session. Whenever a session's process ends, however it ends, its journal is sealed into the
consumption ledger.

The group is done when its committed offsets have reached the ends of the partitions (the
offsets the producers left); every wait is bounded.
"""

from __future__ import annotations

import signal
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from eoslab.admin import committed_offsets
from eoslab.clock import now_ms, wait_until
from eoslab.run_context import RunContext
from eoslab.rundir import ConsumerSessionInfo, ConsumptionInfo
from eoslab.workload.consumer.consumption import seal_session
from eoslab.workload.consumer.handlers import AUTO_COMMIT
from eoslab.workload.consumer.session import (
    ARM_CRASH,
    ARM_FREEZE,
    ARM_SEEK_BACK,
    ARM_SEEK_FORWARD,
    ConsumerSpec,
)
from eoslab.workload.consumer.sink.database import Sink, describe
from eoslab.workload.consumer.spec import ConsumerLoop, ConsumerWorkloadSpec
from eoslab.workload.sessions import Session, SessionProcess, SessionTable, stop_all

STOP_GRACE_S = 15.0
OFFSETS_TIMEOUT_S = 10.0
# what a partition's leader answers ListOffsets with while leadership moves
_LEADER_MOVING = {
    KafkaError.OFFSET_NOT_AVAILABLE,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.UNKNOWN_LEADER_EPOCH,
}
ARM_TIMEOUT_S = 60.0
"""How long an armed crash or freeze point may wait for the consumer's next effect."""
SETTLE_TIMEOUT_S = 60.0
"""How long a run waits for its consumers to form the group before producing anyway."""


class ConsumerWorkloadError(RuntimeError):
    """The consumer workload cannot do what was asked (e.g. crash a consumer that is not running)."""


class ConsumerWorkload:
    def __init__(self, spec: ConsumerWorkloadSpec, context: RunContext) -> None:
        self.spec = spec
        self.context = context
        self.run_dir = context.run_dir
        self.run_id = context.run_id
        self.group = spec.group or f"eoslab-{context.run_id}"
        self.sink = spec.sink or str(context.run_dir.sink_sqlite)
        self._sessions: SessionTable[ConsumerSessionInfo] = SessionTable(
            "consumer", spec.consumers, ConsumerWorkloadError
        )
        self._observer: Consumer | None = None

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Prepare the ledger folders and an empty sink, then start every consumer."""
        self.run_dir.create_consumption()
        sink = Sink(self.sink)
        try:
            sink.create_schema()
            if not sink.is_empty():
                raise ConsumerWorkloadError(f"the sink {describe(self.sink)} is not empty")
        finally:
            sink.close()
        for consumer in range(self.spec.consumers):
            self._launch(
                consumer,
                crash_after_effects=self.spec.crash_after_effects.get(consumer),
                freeze_after_effects=self.spec.freeze_after_effects.get(consumer),
            )

    def wait_settled(self, timeout_s: float = SETTLE_TIMEOUT_S) -> bool:
        """Until the group has formed (True) or the timeout (False): every running session
        reports the same generation (under KIP-848 the same member epoch: every member has
        caught up with the group's target assignment), their assignments cover every
        partition, and as many of
        them as can have partitions do. A run produces after this, so that its timeline meets
        every consumer consuming: librdkafka members join seconds apart, and one that joins
        after the last record was processed never applies an effect to crash after."""
        return bool(wait_until(self.settled, timeout_s, interval_s=0.1))

    def settled(self) -> bool:
        running = [s.process.progress for s in self._sessions.all() if s.process.running]
        if not running:
            return False
        assignments = [set(p.get("assignment") or ()) for p in running]
        generations = {p.get("generation") for p in running}
        return (
            len(generations) == 1
            and set().union(*assignments) == set(range(self.context.partitions))
            and sum(1 for a in assignments if a) == min(len(running), self.context.partitions)
        )

    def crash(self, consumer: int) -> ConsumerSessionInfo:
        """kill -9 the consumer's running session; returns once its ledger is sealed."""
        session = self._running(consumer)
        session.process.kill(STOP_GRACE_S)
        return session.info

    def restart(
        self,
        consumer: int,
        *,
        crash_after_effects: int | None = None,
        freeze_after_effects: int | None = None,
    ) -> ConsumerSessionInfo:
        """A new session (a new member) for a consumer whose last session has ended."""
        current = self._sessions.current(consumer)
        if current is not None and current.process.running:
            raise ConsumerWorkloadError(f"consumer {consumer} is still running")
        return self._launch(consumer, crash_after_effects, freeze_after_effects).info

    def crash_after_next_effect(
        self, consumer: int, timeout_s: float = ARM_TIMEOUT_S
    ) -> tuple[ConsumerSessionInfo, bool]:
        """Arm the running session's crash point: it kills itself (-9) right after its next
        applied effect, before that record's offset is committed. Returns once it has ended and
        its ledger is sealed, with whether it died at that point: if no effect comes within
        ``timeout_s`` it is killed from outside, and if it ends first on its own (nothing left
        to read), it did not crash at all."""
        session = self._running(consumer)
        session.process.signal(ARM_CRASH)
        if not wait_until(lambda: session.process.finished, timeout_s, interval_s=0.05):
            session.process.kill(STOP_GRACE_S)
        return session.info, session.process.crashed_on_purpose

    def freeze_after_next_effect(self, consumer: int, timeout_s: float = ARM_TIMEOUT_S) -> bool:
        """Arm the running session's freeze point: it stops itself (SIGSTOP) right after its next
        applied effect, outside any sink transaction. True once it has; if no effect comes within
        ``timeout_s`` it is stopped from outside, and False. :meth:`resume` wakes it."""
        session = self._running(consumer)
        session.process.signal(ARM_FREEZE)
        frozen = wait_until(
            lambda: session.process.progress.get("state") == "frozen", timeout_s, interval_s=0.05
        )
        if not frozen:
            session.process.signal(signal.SIGSTOP)
        return bool(frozen)

    def seek_after_next_effect(
        self, consumer: int, back: bool, timeout_s: float = ARM_TIMEOUT_S
    ) -> dict[str, int] | None:
        """Arm the running session's seek point: right after its next applied effect it seeks
        that record's partition back to its log start (``back``) or forward past the next
        records. Returns the seek (partition, from, to) once made; None if no effect came
        within ``timeout_s``."""
        session = self._running(consumer)
        made = len(session.process.progress.get("sought") or [])
        session.process.signal(ARM_SEEK_BACK if back else ARM_SEEK_FORWARD)
        wait_until(
            lambda: len(session.process.progress.get("sought") or []) > made,
            timeout_s,
            interval_s=0.05,
        )
        sought = session.process.progress.get("sought") or []
        return dict(sought[-1]) if len(sought) > made else None

    def pause(self, consumer: int) -> None:
        """SIGSTOP: every thread stops, heartbeats too; sockets stay open."""
        self._running(consumer).process.signal(signal.SIGSTOP)

    def resume(self, consumer: int) -> None:
        self._running(consumer).process.signal(signal.SIGCONT)

    def join(self) -> int:
        """One more consumer in the group; returns its index."""
        consumer = self._sessions.new_worker()
        self._launch(consumer, None, None)
        return consumer

    def leave(self, consumer: int) -> ConsumerSessionInfo:
        """A clean close: the consumer commits, leaves the group and ends (bounded)."""
        session = self._running(consumer)
        stop_all([session.process], STOP_GRACE_S)
        return session.info

    def stop(self) -> None:
        """End every running session cleanly (SIGKILL after a grace)."""
        stop_all((s.process for s in self._sessions.all()), STOP_GRACE_S)
        if self._observer is not None:
            self._observer.close()
            self._observer = None

    def wait(self, timeout_s: float, poll_s: float = 0.1) -> bool:
        """Until every session has ended and been sealed (True) or the timeout (False)."""
        return bool(wait_until(lambda: self.finished, timeout_s, poll_s))

    # ---------------------------------------------------------------- offsets
    def end_offsets(self) -> dict[int, int]:
        """Each partition's high watermark now (where the producers left it)."""
        observer = self._offsets_observer()
        return {
            p: _high_watermark(observer, TopicPartition(self.context.topic, p))
            for p in range(self.context.partitions)
        }

    def committed_offsets(self) -> dict[int, int]:
        """The group's committed offset per partition (never committed: left out), from its
        coordinator."""
        return committed_offsets(
            self._offsets_observer(),
            self.group,
            self.context.topic,
            self.context.partitions,
            OFFSETS_TIMEOUT_S,
        )

    def caught_up(self, ends: dict[int, int]) -> bool:
        """Committed up to ``ends`` on every partition (False while the coordinator is away)."""
        try:
            committed = self.committed_offsets()
        except KafkaException:
            return False
        return all(committed.get(p, -1) >= end for p, end in ends.items() if end > 0)

    def wait_caught_up(
        self, timeout_s: float, ends: dict[int, int] | None = None, poll_s: float = 0.5
    ) -> bool:
        """Until the group has committed up to ``ends`` (default: the ends now) or the timeout."""
        target = ends if ends is not None else self.end_offsets()
        return bool(wait_until(lambda: self.caught_up(target), timeout_s, poll_s))

    def _offsets_observer(self) -> Consumer:
        """A client of the group that never joins it: watermarks and committed offsets."""
        if self._observer is None:
            self._observer = Consumer(
                {
                    "bootstrap.servers": self.context.bootstrap,
                    "group.id": self.group,
                    "log_level": 3,
                }
            )
        return self._observer

    # ---------------------------------------------------------------- views
    @property
    def finished(self) -> bool:
        return all(s.process.finished for s in self._sessions.all())

    @property
    def auto_commit(self) -> bool:
        """Its client commits what it handed out, on its timer (the auto-commit mode)."""
        return self.spec.mode in AUTO_COMMIT

    def progress(self, consumer: int) -> dict[str, Any]:
        """The last progress line of the consumer's current session."""
        current = self._sessions.current(consumer)
        return {} if current is None else current.process.progress

    def generation(self, excluding: int | None = None) -> int:
        """The newest group generation a running consumer (but ``excluding``) reports; -1 when
        none is in a generation."""
        running = [
            int(s.process.progress.get("generation", -1) or -1)
            for index, s in self._sessions.current_by_worker()
            if index != excluding and s.process.running
        ]
        return max(running, default=-1)

    def generations(self, consumer: int) -> list[int]:
        """The generations (KIP-848: member epochs) the consumer's current session was a member
        in, in order."""
        session = self._sessions.current(consumer)
        return [] if session is None else list(session.process.progress.get("generations", []))

    def total(self, name: str) -> int:
        """A progress counter summed over every session: processed, applied, duplicate,
        foreign, commits, commit_errors."""
        return sum(int(s.process.progress.get(name, 0)) for s in self._sessions.all())

    @property
    def processed(self) -> int:
        return self.total("processed")

    @property
    def sessions(self) -> list[ConsumerSessionInfo]:
        return sorted(
            (s.info for s in self._sessions.all()), key=lambda i: (i.started_ms, i.consumer)
        )

    def info(self) -> ConsumptionInfo:
        """run.json's ``consumption``."""
        return ConsumptionInfo(
            group=self.group,
            mode=self.spec.mode,
            group_protocol=self.spec.group_protocol,
            sink=describe(self.sink),
            consumers=self.spec.consumers,
            consumer_config=self.spec.consumer_config,
            sessions=self.sessions,
        )

    def failures(self) -> list[str]:
        """Sessions that exited abnormally without being crashed on purpose (their own seeded
        crash point included)."""
        return self._sessions.failures()

    # ---------------------------------------------------------------- internals
    def _running(self, consumer: int) -> Session[ConsumerSessionInfo]:
        session = self._sessions.current(consumer)
        if session is None or not session.process.running:
            raise ConsumerWorkloadError(f"consumer {consumer} has no running session")
        return session

    def _launch(
        self, consumer: int, crash_after_effects: int | None, freeze_after_effects: int | None
    ) -> Session[ConsumerSessionInfo]:
        spec = self.spec
        session_id = uuid.uuid4().hex
        session_spec = ConsumerSpec(
            **spec.model_dump(include=set(ConsumerLoop.model_fields)),
            run_dir=self.run_dir.path,
            run_id=self.run_id,
            session_id=session_id,
            consumer=consumer,
            bootstrap=self.context.bootstrap,
            topic=self.context.topic,
            group=self.group,
            mode=spec.mode,
            sink=self.sink,
            seed=self.context.seed,
            config=spec.consumer_config,
            crash_after_effects=crash_after_effects,
            freeze_after_effects=freeze_after_effects,
            client=self.context.client,
        )
        info = ConsumerSessionInfo(session_id=session_id, consumer=consumer, started_ms=now_ms())

        def ended(_: SessionProcess) -> None:
            seal_session(self.run_dir, consumer, session_id)
            info.ended_ms = now_ms()

        session = Session(
            info,
            SessionProcess(
                "eoslab.workload.consumer.session",
                session_spec.model_dump_json(),
                self.run_dir.consumer_log_file(session_id),
                on_exit=ended,
                client=self.context.client,
            ),
        )
        self._sessions.add(consumer, session)
        return session


def _high_watermark(observer: Consumer, partition: TopicPartition) -> int:
    """The partition's high watermark, asked again while its leader answers with a retriable
    error (a leader elected moments ago answers OFFSET_NOT_AVAILABLE until its high watermark
    has caught up), for up to :data:`OFFSETS_TIMEOUT_S`."""
    deadline = time.monotonic() + OFFSETS_TIMEOUT_S
    while True:
        try:
            return int(observer.get_watermark_offsets(partition, timeout=OFFSETS_TIMEOUT_S)[1])
        except KafkaException as failure:
            if failure.args[0].code() not in _LEADER_MOVING or time.monotonic() > deadline:
                raise
        time.sleep(0.2)
