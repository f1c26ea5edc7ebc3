"""A hanging transaction (issue 21): the producer's running session freezes (SIGSTOP) inside an
open transaction that already has a record in the log, and nobody ends it: no commit, no abort,
no newer session of its transactional id. Every partition it wrote to is held at that record for
read_committed readers (the last stable offset cannot pass an open transaction), whatever the
other producers commit after it. The transaction coordinator must abort it once it has been
open for the producer's ``transaction.timeout.ms`` (Kafka's abortTimedOutTransactions, every
``transaction.abort.timed.out.transaction.cleanup.interval.ms``), and the last stable offsets
must then move past it: a broker that never does leaves every read_committed consumer of those
partitions stuck for good (KAFKA-12671, KAFKA-14402 are hanging transactions Kafka had).

At the step's end (``duration``, which must outlast the timeout) the frozen session is killed
(kill -9, as an operator ends a stuck process) and a new session sends what is left of the
producer's share; the killed session's open transaction is sealed ``aborted`` in the ledger (no
commit was ever asked for), so any read of it is an ``aborted_read``.

Evidence, from the partitions themselves while the session was frozen: where the transaction's
first record sits in each partition it wrote to (read read_uncommitted), the last stable offset
held at or below it while the high watermark went on (records held back from read_committed
readers), then past it — at least ``transaction.timeout.ms`` after the transaction began, while
the session was still frozen: the coordinator's abort, nobody else's. A transaction that never
held a partition (none of its records reached the log), was never released within the step, or
was released before its timeout, and the step did not take effect."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from confluent_kafka import Consumer, KafkaException, TopicPartition

from eoslab.admin import admin_client, end_offsets
from eoslab.background import Background
from eoslab.clock import now_ms
from eoslab.fault_events import FaultPhase
from eoslab.message import MessageFormatError, decode
from eoslab.nemesis.steps.base import ProducerStep, ResolvedStep, ScenarioShape, StepContext

SAMPLE_EVERY_S = 0.25
"""How often the watch asks for the held partitions' last stable offsets and high watermarks."""
RELEASE_MARGIN_S = 4.0
"""How much longer than ``transaction.timeout.ms`` the step must last: the coordinator's check
runs every second in the lab (10 s by default in Kafka, README)."""
EARLY_TOLERANCE_MS = 200
"""A release this much before the timeout still counts as the timeout's (clock and sampling)."""
READ_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class OffsetsSample:
    """The held partitions at one moment: last stable offsets and high watermarks."""

    at_ms: int
    stable: dict[int, int]
    high: dict[int, int]


@dataclass
class OffsetsWatch(Background):
    """Samples the partitions' offsets every :data:`SAMPLE_EVERY_S` until stopped (a failed
    sample, e.g. a leader moving, is counted and skipped)."""

    bootstrap: str
    topic: str
    partitions: list[int]
    samples: list[OffsetsSample] = field(default_factory=list)
    failed: int = 0

    thread_name: ClassVar[str] = "transaction-hang-watch"
    join_timeout_s: ClassVar[float | None] = READ_TIMEOUT_S

    def _run(self) -> None:
        client = admin_client(self.bootstrap)
        while not self._stop.is_set():
            try:
                stable = end_offsets(client, self.topic, self.partitions, "read_committed", 5.0)
                high = end_offsets(client, self.topic, self.partitions, timeout_s=5.0)
            except KafkaException:
                self.failed += 1
            else:
                self.samples.append(OffsetsSample(now_ms(), stable, high))
            self._stop.wait(SAMPLE_EVERY_S)


def first_offsets(
    bootstrap: str,
    topic: str,
    session_id: str,
    records: Iterable[tuple[int, int]],
    starts: dict[int, int],
) -> dict[int, int]:
    """Per partition, the offset of the first record of ``records`` ((partition, seq) of
    session ``session_id``) in the log, read read_uncommitted from ``starts`` up to the high
    watermark; a partition none of them reached is left out."""
    wanted = set(records)
    ends = end_offsets(bootstrap, topic, starts.keys())
    open_ends = {p: end for p, end in ends.items() if end > starts[p]}
    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"eoslab-hang-{session_id[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
            "log_level": 0,
        }
    )
    found: dict[int, int] = {}
    try:
        reader.assign([TopicPartition(topic, p, starts[p]) for p in open_ends])
        deadline = time.monotonic() + READ_TIMEOUT_S
        left = set(open_ends)
        while left and time.monotonic() < deadline:
            for message in reader.consume(500, 0.5):
                partition, offset = message.partition(), message.offset()
                if message.error() is not None or partition is None or offset is None:
                    continue
                if partition in found or partition not in left:
                    continue
                try:
                    record = decode(message.key(), message.value())
                except MessageFormatError:
                    continue
                if record.session_id == session_id and (partition, record.seq) in wanted:
                    found[partition] = offset
                    left.discard(partition)
            # read to the end: past the markers too (control records never reach a consumer)
            positions = reader.position([TopicPartition(topic, p) for p in left])
            left -= {tp.partition for tp in positions if tp.offset >= open_ends[tp.partition]}
    finally:
        reader.close()
    return found


@dataclass(frozen=True)
class HangJudgement:
    took_effect: bool
    evidence: str
    observed: dict[str, Any]


def judge_hang(
    samples: list[OffsetsSample], first: dict[int, int], begun_ms: int, timeout_ms: int
) -> HangJudgement:
    """Whether the samples show the transaction (first record at ``first[p]`` in each partition,
    begun at ``begun_ms``) holding every partition it wrote to, then released by its timeout."""
    if not first:
        return HangJudgement(
            False, "none of the transaction's records reached the log: nothing was held", {}
        )
    held_back: dict[int, int] = {}
    released_after: dict[int, float] = {}
    problems: list[str] = []
    for partition, offset in sorted(first.items()):
        held = [s for s in samples if s.stable[partition] <= offset < s.high[partition]]
        release = next((s for s in samples if s.stable[partition] > offset), None)
        if not held:
            problems.append(f"partition {partition} was never seen held at offset {offset}")
            continue
        held_back[partition] = max(s.high[partition] - s.stable[partition] for s in held)
        if release is None:
            last = samples[-1]
            problems.append(
                f"partition {partition}'s last stable offset still {last.stable[partition]} "
                f"(the transaction's first record at {offset}) "
                f"{(last.at_ms - begun_ms) / 1000:.1f} s after it began: never aborted"
            )
            continue
        released_after[partition] = round((release.at_ms - begun_ms) / 1000, 2)
        if release.at_ms - begun_ms < timeout_ms - EARLY_TOLERANCE_MS:
            problems.append(
                f"partition {partition} released {released_after[partition]:g} s after the "
                f"transaction began, before its {timeout_ms / 1000:g} s timeout"
            )
    observed = {
        "first_offsets": first,
        "held_back": held_back,
        "released_after_s": released_after,
        "samples": len(samples),
    }
    held_text = ", ".join(
        f"partition {p} at {first[p]} ({held_back[p]} records held back)" for p in held_back
    )
    if problems:
        return HangJudgement(False, "; ".join(problems), observed)
    return HangJudgement(
        True,
        f"open transaction held {held_text}; released by the coordinator after "
        f"{max(released_after.values()):g} s (transaction.timeout.ms {timeout_ms})",
        observed,
    )


class TransactionHangStep(ProducerStep):
    kind: Literal["transaction-hang"]
    needs_end: ClassVar[str | None] = "a hanging transaction"

    def misfit(self, scenario: ScenarioShape) -> str | None:
        timeout_s = scenario.transaction_timeout_s
        if timeout_s is None:
            return "kind: transaction-hang needs transactional producers (workload.transactions)"
        length = self.length_s
        if length is not None and length < timeout_s + RELEASE_MARGIN_S:
            return (
                f"duration: {length:g} s; the transaction must be left hanging past the "
                f"producers' transaction.timeout.ms ({timeout_s:g} s) and "
                f"{RELEASE_MARGIN_S:g} s more for the coordinator's abort to be seen"
            )
        return super().misfit(scenario)

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        workload = ctx.workload()
        session, frozen = workload.freeze_mid_transaction(self.producer)
        session_id = session.session_id
        txn = None if frozen is None else int(frozen["open_txn"]["txn"])
        begun = None if txn is None else workload.transaction_begun(session_id, txn)
        if frozen is None or begun is None:
            ctx.judge(
                step,
                False,
                f"{self.who} session {session_id[:8]} never froze in an open transaction with "
                "a record in the log (it ended first, or none was acknowledged in time)",
                session_id=session_id,
            )
            ctx.log(step, FaultPhase.START, target=self.who, session_id=session_id)
            return
        partitions = sorted({int(record[0]) for record in begun["records"]})
        context = ctx.context
        stable = end_offsets(context.bootstrap, context.topic, partitions, "read_committed")
        watch = OffsetsWatch(context.bootstrap, context.topic, partitions)
        watch.start()

        def kill_and_restart() -> None:
            watch.stop()
            workload.crash(self.producer)
            restarted = workload.restart(self.producer)
            ctx.observe(step, restarted=restarted.session_id)

        ctx.broke(
            step,
            f"kill -9 {self.who} session {session_id[:8]}, start a new one",
            kill_and_restart,
            session_id=session_id,
            begun=begun,
            stable=stable,
            watch=watch,
        )
        ctx.judge(
            step,
            False,
            f"{self.who} session {session_id[:8]} frozen in transaction {txn} "
            f"(partitions {partitions}); not judged yet",
            session_id=session_id,
            open_txn=frozen["open_txn"],
        )
        ctx.log(
            step,
            FaultPhase.START,
            target=self.who,
            signal="SIGSTOP",
            session_id=session_id,
            open_txn=frozen["open_txn"],
        )

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        memo = ctx.memo(step)
        if "watch" not in memo:  # judged at the start: it never froze
            return
        watch: OffsetsWatch = memo["watch"]
        watch.stop()
        samples = list(watch.samples)
        begun: dict[str, Any] = memo["begun"]
        context = ctx.context
        first = first_offsets(
            context.bootstrap,
            context.topic,
            memo["session_id"],
            ((int(r[0]), int(r[1])) for r in begun["records"]),
            memo["stable"],
        )
        transactions = ctx.workload().spec.transactions
        timeout_ms = 0 if transactions is None else transactions.transaction_timeout_ms
        judged = judge_hang(samples, first, int(begun["begin_ms"]), timeout_ms)
        ctx.repair(step)
        ctx.judge(
            step,
            judged.took_effect,
            f"{self.who} session {memo['session_id'][:8]} frozen in transaction "
            f"{begun['txn']}: {judged.evidence}",
            failed_samples=watch.failed,
            **judged.observed,
        )
        ctx.log(
            step,
            FaultPhase.END,
            target=self.who,
            signal="SIGKILL",
            released_after_s=judged.observed.get("released_after_s"),
        )
