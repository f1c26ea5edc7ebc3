"""One consumer session, as its own OS process:
``python -m eoslab.workload.consumer.session SPEC_JSON``.

A member of the run's consumer group (librdkafka, ``subscribe()``). It takes records in
batches (``consume``), applies each to the sink in its handler mode (one database
transaction a record), journals every processed record and every commit to the consumption
ledger, and prints a JSON progress line to stdout every PROGRESS_INTERVAL_S.

Offsets: in ``auto-commit`` librdkafka stores a record's offset when ``consume`` hands it
out and commits stored offsets on its timer. The other modes commit explicitly what they
have processed: every ``commit_every`` records, when nothing is left to read, before their
partitions are revoked, on waking from a freeze, and at a clean end (a processed record's
ledger line is always written before its offset is committed).

Seeded halt points make the faults of seed 004 exact: ``crash_after_effects`` N kills the
process (-9) right after its N-th applied effect, before any commit (in auto-commit, the first
such effect from the N-th on with records of its batch still to process, once the client's
auto-commit has committed past every record handed out: those are never processed);
``freeze_after_effects`` N stops it (SIGSTOP) there: a zombie until someone sends SIGCONT,
when it commits at once what it processed (the zombie's commit, with the membership it held;
were it left for later, the next ``consume`` would serve the lost assignment first and drop it).
The nemesis arms the same points in a running session: SIGUSR1 (:data:`ARM_CRASH`) makes the
next applied effect the crash point, SIGUSR2 (:data:`ARM_FREEZE`) the freeze point.

It also arms a seek there, the application moving its own position (the negative controls of
the poll checks): :data:`ARM_SEEK_BACK` seeks the record's partition back to its log start,
:data:`ARM_SEEK_FORWARD` past the next :data:`SEEK_FORWARD_RECORDS` records (once the log
holds them, bounded). The rest of that partition's records in the batch in hand are dropped
(the next ``consume`` reads from the new position; other partitions' are processed), and the
progress line lists where each seek went (``sought``).

SIGTERM ends the session cleanly (finish the batch, commit, leave the group). It also ends
after ``idle_exit_s`` without a record or a rebalance, and is terminated (SIGALRM) after
``max_runtime_s`` whatever it is doing: a librdkafka call can wait long on a missing
coordinator.
"""

from __future__ import annotations

import json
import math
import signal
import sys
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from eoslab import message as wire
from eoslab.clients import ClientLaunch
from eoslab.clock import now_ms
from eoslab.rundir import CommitTrigger, Effect, HandlerMode, RunDir, message_id
from eoslab.workload.consumer.consumption import ConsumptionJournal
from eoslab.workload.consumer.group_metadata import NO_MEMBERSHIP, Membership, membership
from eoslab.workload.consumer.handlers import AUTO_COMMIT, HANDLERS
from eoslab.workload.consumer.sink.database import Sink
from eoslab.workload.consumer.sink.effects import Delivery
from eoslab.workload.consumer.sink.orders import command_of
from eoslab.workload.consumer.spec import ConsumerLoop
from eoslab.workload.drivers.api import ClientApi, halt

ARM_CRASH = signal.SIGUSR1
ARM_FREEZE = signal.SIGUSR2
ARM_SEEK_BACK = signal.SIGRTMIN
ARM_SEEK_FORWARD = signal.SIGRTMAX
SEEK_FORWARD_RECORDS = 10
SEEK_WAIT_S = 5.0
"""How long a forward seek waits for the log to hold the records it skips."""
PROGRESS_INTERVAL_S = 0.2
GENERATIONS_KEPT = 8
"""The generations a session's progress lines carry at most: its admission is among its first
(a long session in a busy group goes through many more)."""
AUTO_COMMIT_WAIT_S = 10.0
"""How long the auto-commit crash point waits for librdkafka's commit of what it handed out."""


def where(record: Message) -> tuple[int, int]:
    """(partition, offset) of a record librdkafka handed out without error (both are set)."""
    partition, offset = record.partition(), record.offset()
    if partition is None or offset is None:
        raise ValueError(f"a record without a position: {record}")
    return partition, offset


class ConsumerSpec(ConsumerLoop):
    """Everything one consumer session needs (the supervisor passes it as JSON)."""

    run_dir: Path
    run_id: str
    session_id: str
    consumer: int
    bootstrap: str
    topic: str
    group: str
    mode: HandlerMode
    sink: str
    seed: int
    config: dict[str, str | int | float | bool]
    crash_after_effects: int | None = None
    freeze_after_effects: int | None = None
    client: ClientLaunch | None = None
    """The client the session runs (None: the workload's own librdkafka)."""


class ConsumerSession:
    def __init__(self, spec: ConsumerSpec) -> None:
        self.spec = spec
        self.run_dir = RunDir(spec.run_dir)
        self.handler = HANDLERS[spec.mode]
        self.auto_commit = spec.mode in AUTO_COMMIT
        self.sink = Sink(spec.sink)
        self.journal = ConsumptionJournal(self.run_dir.consumer_journal_file(spec.session_id))
        self.counts: Counter[str] = Counter()
        self.pending: dict[int, int] = {}
        """Partition -> offset to commit: past the last record processed and not committed."""
        self.since_commit = 0
        self.received: dict[int, int] = {}
        """Partition -> past the last record ``consume`` handed out (what auto-commit commits)."""
        self.watermarks: dict[int, int | None] = {}
        """Partition -> its high watermark as the client's fetches last said (journaled with
        each record processed: the ``watermark_regression`` check's)."""
        self.committed: dict[int, int] = {}
        self.assignment: set[int] = set()
        self.assigned: Counter[int] = Counter()
        """Partition -> how often the client assigned it to this session (its callbacks)."""
        self.member = NO_MEMBERSHIP
        self.generations: list[int] = []
        """The first generations (KIP-848: member epochs) this session was a member in, in
        order (:data:`GENERATIONS_KEPT` of them): the first one above the group's when it
        started is the rebalance that admitted it (a new KIP-848 member may first report the
        group's epoch of before its join)."""
        self.stopping = False
        self.quiet_since = time.monotonic()
        """Since the last record handed out or the last rebalance: ``idle_exit_s`` counts from
        there (a group formed again after its coordinator's outage has records to hand out)."""
        self.fatal: str | None = None
        self.state = "running"
        self.crash_at = spec.crash_after_effects
        self.left_in_batch: int | None = None
        """At the crash point: the records of the batch in hand it will never process."""
        self.freeze_at = spec.freeze_after_effects
        """The applied-effect counts at which the session kills or stops itself."""
        self.seek_at: tuple[int, int] | None = None
        """(applied-effect count, ARM_SEEK_BACK or ARM_SEEK_FORWARD): where the session seeks."""
        self.sought: list[dict[str, int]] = []
        """The seeks it made: partition, from (the next offset it would have read), to."""
        self._last_progress = 0.0
        config: dict[str, object] = {
            **spec.config,
            "bootstrap.servers": spec.bootstrap,
            "group.id": spec.group,
            "enable.auto.commit": self.auto_commit,
            "error_cb": self._on_error,
        }
        if self.auto_commit:
            config["on_commit"] = self._on_auto_commit
        self.client = ClientApi(spec.client)
        self.consumer = self.client.consumer(config)

    # ---------------------------------------------------------------- the loop
    def run(self) -> None:
        spec = self.spec
        self.consumer.subscribe(
            [spec.topic],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        while not self.stopping and self.fatal is None:
            records = [
                m for m in self.consumer.consume(spec.batch, spec.poll_timeout_s) if self._ok(m)
            ]
            if not records:
                self._commit(CommitTrigger.IDLE)
                if time.monotonic() - self.quiet_since >= spec.idle_exit_s:
                    break
                self._maybe_progress()
                continue
            self.quiet_since = time.monotonic()
            for record in records:
                partition, offset = where(record)
                self.received[partition] = offset + 1
            self._learn_watermarks(records)
            moved: int | None = None
            for index, record in enumerate(records):
                if where(record)[0] == moved:
                    continue  # read again from where the seek put the partition
                if self._process(record) is Effect.APPLIED:
                    self._halt_points(left=len(records) - index - 1)
                    moved = self._seek_point(record) if moved is None else moved
                if self.since_commit >= spec.commit_every:
                    self._commit(CommitTrigger.EVERY)
                self._maybe_progress()
        self._finish()

    def _learn_watermarks(self, records: list[Message]) -> None:
        """Each partition's high watermark as the client's fetches last said, for the records
        just handed out (librdkafka's cached watermark: no request; unknown stays None)."""
        for partition in {where(record)[0] for record in records}:
            here = TopicPartition(self.spec.topic, partition)
            _, high = self.consumer.get_watermark_offsets(here, cached=True)
            self.watermarks[partition] = high if high >= 0 else None

    def _ok(self, record: Message) -> bool:
        error = record.error()
        if error is not None:
            print(f"consume: {error.name()}: {error.str()}", file=sys.stderr, flush=True)
        return error is None

    def _process(self, record: Message) -> Effect:
        spec = self.spec
        partition, offset = where(record)
        self.member = membership(self.consumer)
        message = self._workload_message(record)
        apply_order = None
        if message is None:
            effect = Effect.FOREIGN
        else:
            delivery = Delivery(
                message,
                command_of(spec.seed, message.key, message.key_seq),
                partition,
                offset,
                spec.consumer,
                spec.session_id,
                self.member.member_id,
                self.member.generation,
            )
            apply_order = self.handler(self.sink, delivery, spec.mode, now_ms())
            effect = Effect.DUPLICATE if apply_order is None else Effect.APPLIED
        self.journal.processed(
            {
                **self._membership_columns(),
                "n": self.processed,
                "partition": partition,
                "offset": offset,
                "message_id": None
                if message is None
                else message_id(message.session_id, message.partition, message.seq),
                "session_id": None if message is None else message.session_id,
                "producer": None if message is None else message.producer,
                "seq": None if message is None else message.seq,
                "key": None if message is None else message.key,
                "key_seq": None if message is None else message.key_seq,
                "effect": effect.value,
                "apply_order": apply_order,
                "processed_ms": now_ms(),
                "watermark": self.watermarks.get(partition),
                "assignment": self.assigned[partition],
            }
        )
        self.counts[effect] += 1
        if not self.auto_commit:
            self.pending[partition] = offset + 1
            self.since_commit += 1
        return effect

    @property
    def processed(self) -> int:
        return sum(self.counts[effect] for effect in Effect)

    def _workload_message(self, record: Message) -> wire.Message | None:
        """The record as a workload message of this run, or None for a foreign record."""
        try:
            message = wire.decode(record.key(), record.value())
        except wire.MessageFormatError:
            return None
        return message if message.run_id == self.spec.run_id else None

    def _membership_columns(self) -> dict[str, object]:
        return {
            "run_id": self.spec.run_id,
            "consumer": self.spec.consumer,
            "consumer_session": self.spec.session_id,
            "member_id": self.member.member_id,
            "generation": self.member.generation,
        }

    # ---------------------------------------------------------------- halt points
    def arm(self, signum: int, _frame: object = None) -> None:
        """ARM_CRASH / ARM_FREEZE: halt right after the next applied effect, before its commit;
        ARM_SEEK_BACK / ARM_SEEK_FORWARD: seek there."""
        after_next = self.counts[Effect.APPLIED] + 1
        if signum == ARM_CRASH:
            self.crash_at = after_next
        elif signum == ARM_FREEZE:
            self.freeze_at = after_next
        else:
            self.seek_at = (after_next, signum)
        self.state = "armed"  # shown by the next progress line (no I/O in a signal handler)

    def _seek_point(self, record: Message) -> int | None:
        """At the armed seek point, seek the record's partition (back to its log start, or
        forward past the next records) and return it; else None."""
        if self.seek_at is None or self.counts[Effect.APPLIED] != self.seek_at[0]:
            return None
        direction = self.seek_at[1]
        self.seek_at = None
        partition, offset = where(record)
        here = TopicPartition(self.spec.topic, partition)
        low, high = self.consumer.get_watermark_offsets(here, timeout=SEEK_WAIT_S, cached=False)
        if direction == ARM_SEEK_BACK:
            target = low
        else:
            target = offset + 1 + SEEK_FORWARD_RECORDS
            deadline = time.monotonic() + SEEK_WAIT_S
            while high < target and time.monotonic() < deadline:
                time.sleep(0.05)
                _, high = self.consumer.get_watermark_offsets(here, SEEK_WAIT_S, cached=False)
            target = min(target, high)
        self.consumer.seek(TopicPartition(self.spec.topic, partition, target))
        self.sought.append({"partition": partition, "from": offset + 1, "to": target})
        self.state = "running"
        self._progress(done=False)
        return partition

    def _halt_points(self, left: int) -> None:
        """Halt here if a point is due. ``left``: records of the batch in hand after this one;
        in auto-commit the crash point waits for an effect with some left (handed out, so
        committed by the auto-commit, and never processed: at the end of a batch nothing is)."""
        applied = self.counts[Effect.APPLIED]
        if applied == self.freeze_at:
            self.freeze_at = None
            self._halt("frozen", signal.SIGSTOP)
            self._commit(CommitTrigger.WAKE)
        crash = self.crash_at is not None and applied >= self.crash_at
        if crash and (left > 0 or not self.auto_commit):
            if self.auto_commit:
                self._await_auto_commit()
            self.left_in_batch = left
            self._halt("crashing", signal.SIGKILL)

    def _halt(self, state: str, signum: signal.Signals) -> None:
        self.state = state
        self._progress(done=False)
        halt(signum)
        self.state = "running"

    def _await_auto_commit(self) -> None:
        """Paused, so that no more records are handed out, serve librdkafka's callbacks until
        its auto-commit reports offsets past every record handed out (bounded)."""
        self.consumer.pause([TopicPartition(self.spec.topic, p) for p in self.assignment])
        deadline = time.monotonic() + AUTO_COMMIT_WAIT_S
        while time.monotonic() < deadline and any(
            self.committed.get(p, -1) < offset for p, offset in self.received.items()
        ):
            record = self.consumer.poll(0.1)
            if record is not None and record.error() is None:
                partition, offset = where(record)
                self.received[partition] = offset + 1

    # ---------------------------------------------------------------- commits
    def _commit(self, trigger: CommitTrigger, partitions: set[int] | None = None) -> None:
        """Commit the processed offsets (of ``partitions``, default all) and journal the outcome."""
        chosen = {
            p: offset for p, offset in self.pending.items() if partitions is None or p in partitions
        }
        if self.auto_commit or not chosen:
            return
        self.member = membership(self.consumer)
        request = [TopicPartition(self.spec.topic, p, o) for p, o in sorted(chosen.items())]
        try:
            answered = self.consumer.commit(offsets=request, asynchronous=False)
            errors = {tp.partition: _name(tp.error) for tp in answered or []}
        except KafkaException as failure:
            errors = dict.fromkeys(chosen, _name(failure.args[0]))
        self._journal_commit(trigger, chosen, errors)
        for p, offset in chosen.items():
            if errors.get(p) is None and self.pending.get(p) == offset:
                del self.pending[p]
        if partitions is None:
            self.since_commit = 0

    def _journal_commit(
        self, trigger: CommitTrigger, offsets: dict[int, int], errors: dict[int, str | None]
    ) -> None:
        number = self.counts["commits"]
        self.counts["commits"] += 1
        for p, offset in sorted(offsets.items()):
            error = errors.get(p)
            self.journal.commit(
                {
                    **self._membership_columns(),
                    "commit": number,
                    "trigger": trigger.value,
                    "partition": p,
                    "offset": offset,
                    "error": error,
                    "committed_ms": now_ms(),
                }
            )
            if error is None:
                self.committed[p] = max(offset, self.committed.get(p, -1))
            else:
                self.counts["commit_errors"] += 1

    def _on_auto_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """librdkafka's report of an auto-commit (served inside consume/poll/close)."""
        if error is not None and error.code() == KafkaError._NO_OFFSET:
            return
        offsets = {tp.partition: tp.offset for tp in partitions if tp.offset >= 0}
        if offsets:
            errors = {tp.partition: _name(tp.error) or _name(error) for tp in partitions}
            self._journal_commit(CommitTrigger.AUTO, offsets, errors)

    # ---------------------------------------------------------------- rebalances
    def _on_assign(self, _: object, partitions: list[TopicPartition]) -> None:
        self.assignment |= {tp.partition for tp in partitions}
        self.assigned.update(tp.partition for tp in partitions)
        self.member = membership(self.consumer)
        self._log_rebalance("assigned", partitions, self.member)
        self._progress(done=False)

    def _on_revoke(self, _: object, partitions: list[TopicPartition]) -> None:
        """Commit what was processed before the partitions go to another member."""
        revoked = {tp.partition for tp in partitions}
        self._log_rebalance("revoked", partitions, membership(self.consumer))
        self._commit(CommitTrigger.REVOKE, revoked)
        self._forget(revoked)

    def _on_lost(self, _: object, partitions: list[TopicPartition]) -> None:
        """The coordinator already gave them away (session expired): a commit would be fenced."""
        self._log_rebalance("lost", partitions, membership(self.consumer))
        self._forget({tp.partition for tp in partitions})

    def _log_rebalance(
        self, kind: str, partitions: list[TopicPartition], member: Membership
    ) -> None:
        """One line in the session's log per rebalance callback, with the membership then; the
        idle clock starts again."""
        self.quiet_since = time.monotonic()
        print(
            f"rebalance: {kind} {sorted(tp.partition for tp in partitions)} at {now_ms()} "
            f"(member {member.member_id}, generation {member.generation})",
            file=sys.stderr,
            flush=True,
        )

    def _forget(self, partitions: set[int]) -> None:
        self.assignment -= partitions
        for p in partitions:
            self.pending.pop(p, None)
        self._progress(done=False)

    # ---------------------------------------------------------------- the end
    def _finish(self) -> None:
        self._commit(CommitTrigger.CLOSE)
        self.consumer.close()
        self.client.close()
        self.journal.close()
        self.sink.close()
        self.state = "done"
        self._progress(done=True)

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self.fatal = error.name()
        self.client.log_error(error)

    def _maybe_progress(self) -> None:
        if time.monotonic() - self._last_progress >= PROGRESS_INTERVAL_S:
            self._progress(done=False)

    def _progress(self, *, done: bool) -> None:
        self._last_progress = time.monotonic()
        if not done:
            # Under KIP-848 a member's epoch moves without a callback of its own (another
            # member's assignment changed): the line shows the membership of now.
            self.member = membership(self.consumer)
        generation = self.member.generation
        known = generation in self.generations or len(self.generations) >= GENERATIONS_KEPT
        if generation > 0 and not known:
            self.generations.append(generation)
        line = {
            **{str(name): count for name, count in self.counts.items()},
            "processed": self.processed,
            "received": self.received,
            "committed": self.committed,
            "assignment": sorted(self.assignment),
            "member_id": self.member.member_id,
            "generation": self.member.generation,
            "generations": self.generations,
            "state": self.state,
            "sought": self.sought,
            "left_in_batch": self.left_in_batch,
            "done": done,
            "fatal": self.fatal,
        }
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()

    def stop(self, *_: object) -> None:
        self.stopping = True


def _name(error: KafkaError | None) -> str | None:
    return None if error is None else error.name()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m eoslab.workload.consumer.session SPEC_JSON", file=sys.stderr)
        return 2
    spec = ConsumerSpec.model_validate_json(argv[0])
    signal.alarm(math.ceil(spec.max_runtime_s))
    session = ConsumerSession(spec)
    signal.signal(signal.SIGTERM, session.stop)
    for signum in (ARM_CRASH, ARM_FREEZE, ARM_SEEK_BACK, ARM_SEEK_FORWARD):
        signal.signal(signum, session.arm)
    session.run()
    return 1 if session.fatal else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
