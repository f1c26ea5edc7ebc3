"""Plant the consumer half of a run by hand: processings, commits and effects in a chosen order.

The steps are kept, then replayed into a run directory and a sink the way the consumer
workload leaves them: effects through the sink's own ``apply_effect`` (so ``apply_order``
numbers them in step order, on SQLite and PostgreSQL alike), or through the run's handler mode
itself when a step leaves the effect to it, the ledger rows through the consumer's journal,
sealed into Parquet by the workload's own sealing. A planted topic
(:class:`planted_runs.PlantedRun`) holds the records they refer to.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from eoslab.message import Message
from eoslab.rundir import (
    CommitTrigger,
    ConsumerSessionInfo,
    ConsumptionInfo,
    Effect,
    HandlerMode,
    RunDir,
    message_id,
)
from eoslab.workload.consumer.consumption import ConsumptionJournal, seal_session
from eoslab.workload.consumer.handlers import HANDLERS
from eoslab.workload.consumer.sink.database import Sink, describe
from eoslab.workload.consumer.sink.effects import Delivery, apply_effect
from eoslab.workload.consumer.sink.orders import command_of

PROCESSED_MS = 1_700_000_100_000


@dataclass(frozen=True)
class Member:
    """A consumer session in one generation of the group."""

    consumer: int
    session: str
    generation: int


@dataclass(frozen=True)
class Processing:
    member: Member
    partition: int
    offset: int
    message: Message | None
    """None: a foreign record."""
    effect: Effect | None
    """None: whatever the handler of the run's mode does with it."""
    journaled: bool
    """False: the effect landed, its ledger row did not (killed in between)."""
    watermark: int | None = None
    """The high watermark the consumer's client was told (None: not told)."""
    assignment: int = 1
    """How often the member's client had been assigned the partition by then."""


@dataclass(frozen=True)
class Commit:
    member: Member
    partition: int
    offset: int
    error: str | None


@dataclass
class PlantedConsumption:
    run_id: str
    seed: int = 0
    mode: HandlerMode = "commit-after"
    steps: list[Processing | Commit] = field(default_factory=list)

    def process(
        self,
        member: Member,
        partition: int,
        offset: int,
        message: Message | None,
        effect: Effect | None = Effect.APPLIED,
        *,
        journaled: bool = True,
        watermark: int | None = None,
        assignment: int = 1,
    ) -> None:
        if message is None:
            effect = Effect.FOREIGN
        self.steps.append(
            Processing(member, partition, offset, message, effect, journaled, watermark, assignment)
        )

    def commit(self, member: Member, partition: int, offset: int, error: str | None = None) -> None:
        self.steps.append(Commit(member, partition, offset, error))

    def write(self, run: RunDir, sink_location: str) -> None:
        """Replay the steps into ``run``'s consumption ledger and an empty sink, and record the
        consumer workload in run.json."""
        run.create_consumption()
        sink = Sink(sink_location)
        numbers: Counter[str] = Counter()
        members: dict[str, Member] = {}
        try:
            sink.create_schema()
            for index, step in enumerate(self.steps):
                member = step.member
                members[member.session] = member
                journal = ConsumptionJournal(run.consumer_journal_file(member.session))
                columns = {
                    "run_id": self.run_id,
                    "consumer": member.consumer,
                    "consumer_session": member.session,
                    "member_id": f"member-{member.session}",
                    "generation": member.generation,
                }
                at_ms = PROCESSED_MS + index
                if isinstance(step, Commit):
                    journal.commit(
                        {
                            **columns,
                            "commit": numbers[f"commit {member.session}"],
                            "trigger": CommitTrigger.EVERY.value,
                            "partition": step.partition,
                            "offset": step.offset,
                            "error": step.error,
                            "committed_ms": at_ms,
                        }
                    )
                    numbers[f"commit {member.session}"] += 1
                else:
                    apply_order, effect = self._apply(sink, step, at_ms)
                    if step.journaled:
                        journal.processed(
                            {
                                **columns,
                                "n": numbers[member.session],
                                **_message_columns(step),
                                "effect": effect.value,
                                "apply_order": apply_order,
                                "processed_ms": at_ms,
                                "watermark": step.watermark,
                                "assignment": step.assignment,
                            }
                        )
                    numbers[member.session] += 1
                journal.close()
        finally:
            sink.close()
        for member in members.values():
            seal_session(run, member.consumer, member.session)
        info = run.read_info()
        run.write_info(
            info.model_copy(
                update={
                    "consumption": ConsumptionInfo(
                        group=f"eoslab-{self.run_id}",
                        mode=self.mode,
                        sink=describe(sink_location),
                        consumers=len({m.consumer for m in members.values()}),
                        sessions=[
                            ConsumerSessionInfo(
                                session_id=m.session, consumer=m.consumer, started_ms=PROCESSED_MS
                            )
                            for m in members.values()
                        ],
                    )
                }
            )
        )

    def _apply(self, sink: Sink, step: Processing, at_ms: int) -> tuple[int | None, Effect]:
        """The effect's apply order (None: no effect) and what the ledger says it did."""
        if step.message is None:
            return None, Effect.FOREIGN
        if step.effect is not None and step.effect is not Effect.APPLIED:
            return None, step.effect
        m, member = step.message, step.member
        delivery = Delivery(
            m,
            command_of(self.seed, m.key, m.key_seq),
            step.partition,
            step.offset,
            member.consumer,
            member.session,
            f"member-{member.session}",
            member.generation,
        )
        if step.effect is None:
            apply_order = HANDLERS[self.mode](sink, delivery, self.mode, at_ms)
            return apply_order, Effect.DUPLICATE if apply_order is None else Effect.APPLIED
        with sink.transaction() as tx:
            return apply_effect(tx, delivery, self.mode, at_ms), Effect.APPLIED


def _message_columns(step: Processing) -> dict[str, object]:
    m = step.message
    return {
        "partition": step.partition,
        "offset": step.offset,
        "message_id": None if m is None else message_id(m.session_id, m.partition, m.seq),
        "session_id": None if m is None else m.session_id,
        "producer": None if m is None else m.producer,
        "seq": None if m is None else m.seq,
        "key": None if m is None else m.key,
        "key_seq": None if m is None else m.key_seq,
    }
