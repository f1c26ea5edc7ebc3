"""One copier session (consume-transform-produce), as its own OS process:
``python -m eoslab.workload.copy.session SPEC_JSON``.

A member of the run's copier group (librdkafka, ``subscribe()``, ``isolation.level``
read_committed, no auto-commit) with a producer beside it. It takes up to
``records_per_transaction`` input records at a time and copies each to the same partition of
the output topic (the key kept, the value wrapped: :func:`eoslab.message.encode_copy`, naming
the input's partition and offset). Kafka's exactly-once pattern, in ONE transaction per batch:
``begin_transaction``, the copies, ``send_offsets_to_transaction`` with the consumer's group
metadata (the offsets past the batch), ``commit_transaction``; an error that requires an abort
aborts it and rewinds the consumer to the group's committed offsets, so the batch is copied
again in a later transaction. A fatal error (fenced) ends the session. A commit whose outcome
the client could not confirm (no answer within its tries; franz-go's "unconfirmed" commit, which
its documentation says not to go on from) ends the session too, and a new one takes its place:
its ``init_transactions`` fences this one, the coordinator settles the commit either way, and it
starts from the offsets the group then has committed (``unconfirmed_commit`` on its last
progress line). The at-least-once copier (``transactional`` false, the negative control) produces the
batch, waits for every copy's acknowledgement (as long as its producer retries one:
:data:`DELIVERY_TIMEOUT_MS`), then commits the offsets apart.

Every batch goes to the copier ledger (:mod:`eoslab.workload.copy.journal`) as it goes.

``crash_after_batches`` N: the session kills itself (-9) once its N-th batch is produced and
acknowledged, before the batch's commit is asked for (the transaction open; for the
at-least-once copier, the copies in the log and the offsets not committed).

librdkafka does not always keep its own timeouts: after a kill -9 of the reference broker,
``send_offsets_to_transaction`` (librdkafka 2.16.1) was seen not to return for over a minute
with a timeout of 30 s — its debug log shows AddOffsetsToTxn answered after the restart and
then no FindCoordinator or TxnOffsetCommit at all: librdkafka's open issues #5456 (the
coordinator request's timeout is never checked) and #5511 (a cached group coordinator that
went away is waited for). A watchdog thread ends a session whose librdkafka call has gone
:data:`HANG_MARGIN_S` past its timeout: it says which call (``hung_in`` on its last progress
line) and kills itself (-9) there, as at a crash point; the supervisor starts a new session,
whose ``init_transactions`` fences the hung one and aborts its open transaction. An application
would do the same with a liveness probe.

SIGTERM asks the session to finish: it copies on to the end of every partition it is assigned
(an end-of-partition event under read_committed: the last stable offset) and exits. It is
terminated (SIGALRM) after ``max_runtime_s`` whatever it is doing.
"""

from __future__ import annotations

import json
import math
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, Message, TopicPartition
from pydantic import BaseModel, ConfigDict

from eoslab import message as wire
from eoslab.clients import ClientLaunch
from eoslab.clock import now_ms
from eoslab.rundir import RunDir, TxnOutcome
from eoslab.workload.consumer.session import where
from eoslab.workload.copy.journal import CopyInput, CopyJournal
from eoslab.workload.drivers.api import ClientApi, halt
from eoslab.workload.producer.session import drain
from eoslab.workload.transactions.journal import abort_outcome
from eoslab.workload.transactions.session import call_retried

PROGRESS_INTERVAL_S = 0.2
POLL_S = 0.5
EMPTY_FINISH_S = 10.0
"""A finishing session that has had no partition this long ends (a rebalance, a dead member's
session running out, takes seconds)."""
STATS_INTERVAL_MS = 1000
TRANSACTION_TIMEOUT_MS = 60_000
"""The copiers' transaction.timeout.ms (as the input's producers' in the copy scenarios: Kafka
4's leadership moves after a kill take longer than 10 s)."""
DELIVERY_TIMEOUT_MS = 60_000
"""The at-least-once copier's message.timeout.ms: how long its producer retries a copy (past the
faults of the copy scenarios), and how long it waits for a batch's acknowledgements before it
commits — every copy then has an outcome (a 10 s wait, call_timeout_s, left copies unanswered
while the reference broker, killed -9 for 8 s, took 11 s to serve again)."""
HANG_MARGIN_S = 5.0
"""A librdkafka call still running this long past its own timeout is hung (see above)."""
CRASHING = "crashing"
"""The ``state`` of the progress line written just before the session kills itself."""
CONSUMER_CONFIG: dict[str, str | int | float | bool] = {
    "auto.offset.reset": "earliest",
    "isolation.level": "read_committed",
    "enable.auto.commit": False,
    "enable.partition.eof": True,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 1000,
    "max.poll.interval.ms": 60000,
}
PRODUCER_CONFIG: dict[str, str | int | float | bool] = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
    "statistics.interval.ms": STATS_INTERVAL_MS,
}


class CopierSpec(BaseModel):
    """Everything one copier session needs (the supervisor passes it as JSON)."""

    model_config = ConfigDict(extra="forbid")

    run_dir: Path
    run_id: str
    session_id: str
    worker: int
    bootstrap: str
    input_topic: str
    output_topic: str
    group: str
    transactional_id: str | None
    """None: the at-least-once copier."""
    records_per_transaction: int
    call_timeout_s: float
    crash_after_batches: int | None = None
    finishing: bool = False
    """Start finishing (a session replacing one that ended while the stage finished)."""
    max_runtime_s: float = 600.0
    client: ClientLaunch | None = None
    """The client the session runs (None: the workload's own librdkafka)."""


class CopierSession:
    def __init__(self, spec: CopierSpec) -> None:
        self.spec = spec
        self.run_dir = RunDir(spec.run_dir)
        self.journal = CopyJournal(self.run_dir.copier_journal_file(spec.session_id))
        self.counts: Counter[str] = Counter()
        self.assignment: set[int] = set()
        self.at_end: set[int] = set()
        """Assigned partitions whose end (the last stable offset) was reached since the last
        record, assignment or rewind."""
        self.finishing = spec.finishing
        self.empty_since: float | None = time.monotonic()
        """Since when the session has had no partition (None while it has some)."""
        self.fatal: str | None = None
        self.unconfirmed_commit: str | None = None
        """The error of a commit whose outcome the client left unknown: the session ends, and
        a new one replaces it."""
        self.state = "running"
        self.producer_id: int | None = None
        self.producer_epoch: int | None = None
        self._last_progress = 0.0
        self._in_call: tuple[str, float] | None = None
        """The librdkafka call running now and when it is hung (monotonic)."""
        self._progress_lock = threading.Lock()
        self.client = ClientApi(spec.client)
        self.consumer = self.client.consumer(
            {
                **CONSUMER_CONFIG,
                "bootstrap.servers": spec.bootstrap,
                "group.id": spec.group,
                "error_cb": self._on_error,
            }
        )
        transactional: dict[str, str | int | float | bool] = (
            {"message.timeout.ms": DELIVERY_TIMEOUT_MS}
            if spec.transactional_id is None
            else {
                "transactional.id": spec.transactional_id,
                "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            }
        )
        self.producer = self.client.producer(
            {
                **PRODUCER_CONFIG,
                **transactional,
                "bootstrap.servers": spec.bootstrap,
                "stats_cb": self._on_stats,
                "error_cb": self._on_error,
                "on_delivery": self._on_delivery,
            },
            for_consumer=self.consumer,
        )

    @property
    def transactional(self) -> bool:
        return self.spec.transactional_id is not None

    @property
    def _delivery_wait_s(self) -> float:
        """How long a batch's copies are waited for: a transaction's within its calls' bound;
        the at-least-once copier's until each has an outcome (its producer's own timeout)."""
        if self.transactional:
            return self.spec.call_timeout_s
        return DELIVERY_TIMEOUT_MS / 1000 + HANG_MARGIN_S

    # ---------------------------------------------------------------- callbacks
    def _on_stats(self, raw: str) -> None:
        eos = json.loads(raw).get("eos", {})
        if isinstance(eos.get("producer_id"), int) and eos["producer_id"] >= 0:
            self.producer_id = eos["producer_id"]
            self.producer_epoch = eos.get("producer_epoch")

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self._on_fatal(error)
        self.client.log_error(error)

    def _on_fatal(self, error: KafkaError) -> None:
        self.fatal = self.fatal or error.name()

    def _on_delivery(self, error: KafkaError | None, _: Message) -> None:
        self.counts["acked" if error is None else "failed"] += 1

    def _guarded(self, call: Any) -> Any:
        try:
            return call()
        except KafkaException as raised:
            self._on_fatal(raised.args[0])
            return None

    def _call(self, name: str, call: Callable[[], object]) -> KafkaError | None:
        """A transactional call, retried (:func:`call_retried`), each try watched."""
        return call_retried(lambda: self._watched(name, call), self._on_fatal)

    def _watched(self, name: str, call: Callable[[], object]) -> object:
        """``call()`` (bounded by ``call_timeout_s`` of its own), watched by the watchdog."""
        self._in_call = (name, time.monotonic() + self.spec.call_timeout_s + HANG_MARGIN_S)
        try:
            return call()
        finally:
            self._in_call = None

    def watch(self) -> None:
        """The watchdog thread: kill the session (-9) when a watched call is hung."""
        while True:
            time.sleep(0.2)
            in_call = self._in_call
            if in_call is not None and time.monotonic() > in_call[1]:
                self.counts["hung_in." + in_call[0]] += 1
                self._halt(hung_in=in_call[0])

    # ---------------------------------------------------------------- the loop
    def run(self) -> None:
        if self.transactional:
            error = self._call(
                "init_transactions",
                lambda: self.producer.init_transactions(self.spec.call_timeout_s),
            )
            if error is not None:
                self.fatal = self.fatal or error.name()
        if self.fatal is None:
            self.consumer.subscribe(
                [self.spec.input_topic],
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_revoke,
            )
        while self.fatal is None and self.unconfirmed_commit is None and not self._done():
            batch = [
                m
                for m in self.consumer.consume(self.spec.records_per_transaction, POLL_S)
                if self._take(m)
            ]
            if batch:
                self._copy(batch)
            self._maybe_progress()
        self.consumer.close()
        self._guarded(lambda: drain(self.producer, self.spec.call_timeout_s, self._guarded))
        self.client.close()
        self.journal.close()
        self.state = "done"
        self._progress(done=True)

    def _done(self) -> bool:
        if not self.finishing:
            return False
        if self.empty_since is None:
            return self.assignment <= self.at_end
        return time.monotonic() - self.empty_since >= EMPTY_FINISH_S

    def _take(self, record: Message) -> bool:
        """Whether ``record`` is an input to copy (end-of-partition events are noted)."""
        error = record.error()
        if error is None:
            self.at_end.discard(where(record)[0])
            return True
        if error.code() == KafkaError._PARTITION_EOF:
            partition = record.partition()
            if partition is not None:
                self.at_end.add(partition)
        else:
            print(f"consume: {error.name()}: {error.str()}", file=sys.stderr, flush=True)
        return False

    def _on_assign(self, _: object, partitions: list[TopicPartition]) -> None:
        self.assignment |= {tp.partition for tp in partitions}
        self.at_end -= {tp.partition for tp in partitions}
        self.empty_since = None if self.assignment else self.empty_since
        self._progress(done=False)

    def _on_revoke(self, _: object, partitions: list[TopicPartition]) -> None:
        self.assignment -= {tp.partition for tp in partitions}
        self.at_end -= {tp.partition for tp in partitions}
        if not self.assignment and self.empty_since is None:
            self.empty_since = time.monotonic()
        self._progress(done=False)

    # ---------------------------------------------------------------- one batch
    def _copy(self, batch: list[Message]) -> None:
        spec = self.spec
        txn = self.counts["batches"]
        self.counts["batches"] += 1
        inputs: list[CopyInput] = []
        offsets: dict[int, int] = {}
        for record in batch:
            partition, offset = where(record)
            inputs.append((partition, offset, *_identity(record, spec.run_id)))
            offsets[partition] = max(offsets.get(partition, 0), offset + 1)
        self.journal.begin_copy(txn, inputs, offsets, now_ms())
        begun = (
            self._call("begin_transaction", self.producer.begin_transaction)
            if self.transactional
            else None
        )
        if begun is not None:
            self._settle(txn, TxnOutcome.ABORTED, begun.name())
            return
        failed_before = self.counts["failed"]
        for record in batch:
            partition, offset = where(record)
            copy = wire.Copy(partition, offset, spec.session_id, txn, record.value() or b"")
            self.producer.produce(
                spec.output_topic,
                key=record.key(),
                value=wire.encode_copy(copy),
                partition=partition,
            )
        self._guarded(lambda: self.producer.poll(0))
        positions = [TopicPartition(spec.input_topic, p, o) for p, o in sorted(offsets.items())]
        sent = None
        if self.transactional:
            sent = self._call(
                "send_offsets_to_transaction",
                lambda: self.producer.send_offsets_to_transaction(
                    positions, self.consumer.consumer_group_metadata(), spec.call_timeout_s
                ),
            )
        left = drain(self.producer, self._delivery_wait_s, self._guarded)
        undelivered = None if left is None else left + self.counts["failed"] - failed_before
        if not self.transactional:  # the copies are out: only the offsets are left to commit
            self.journal.ending(txn, True, now_ms())
        if sent is None and undelivered == 0:
            self._crash_point()
        if not self.transactional:
            self._commit_offsets(txn, positions, undelivered)
            return
        self.journal.ending(txn, True, now_ms())
        if sent is not None or undelivered != 0 or self.fatal is not None:
            self._abort(txn, sent.name() if sent is not None else "_UNDELIVERED")
        else:
            self._commit(txn)

    def _crash_point(self) -> None:
        if self.spec.crash_after_batches == self.counts["batches"]:
            self._halt(hung_in=None)

    def _halt(self, *, hung_in: str | None) -> None:
        """Kill the session (-9) here, its last progress line saying so."""
        self.state = CRASHING
        self._progress(done=False, hung_in=hung_in)
        halt(signal.SIGKILL)

    def _commit(self, txn: int) -> None:
        error = self._call(
            "commit_transaction",
            lambda: self.producer.commit_transaction(self.spec.call_timeout_s),
        )
        if error is None:
            self._settle(txn, TxnOutcome.COMMITTED, None)
        elif error.txn_requires_abort():
            self._abort(txn, error.name(), commit_asked=True)
        else:
            self._settle(txn, TxnOutcome.INDETERMINATE, error.name())
            if self.fatal is None:
                self.unconfirmed_commit = error.name()

    def _abort(self, txn: int, reason: str, *, commit_asked: bool = False) -> None:
        """Abort ``txn``: ``aborted``, unless its commit was asked for and the abort failed
        (either may have happened: ``indeterminate``, as in the transactional producer)."""
        error = self._call(
            "abort_transaction",
            lambda: self.producer.abort_transaction(self.spec.call_timeout_s),
        )
        outcome = abort_outcome(commit_asked=commit_asked, abort_failed=error is not None)
        self._settle(txn, outcome, reason)
        if error is not None:
            self.fatal = self.fatal or error.name()
            return
        self._rewind()

    def _rewind(self) -> None:
        """Back to the group's committed offsets (what the aborted batch did not commit)."""
        assigned = [TopicPartition(self.spec.input_topic, p) for p in sorted(self.assignment)]
        if not assigned:
            return
        try:
            committed = self.consumer.committed(assigned, timeout=self.spec.call_timeout_s)
        except KafkaException as error:
            self.fatal = self.fatal or f"rewind: {error.args[0].name()}"
            return
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
            self.at_end.discard(tp.partition)

    def _commit_offsets(
        self, txn: int, positions: list[TopicPartition], undelivered: int | None
    ) -> None:
        """The at-least-once copier: the offsets committed once every copy is acknowledged."""
        if undelivered != 0:
            self._settle(txn, TxnOutcome.INDETERMINATE, "_UNDELIVERED")
            self.fatal = self.fatal or "_UNDELIVERED"
            return
        try:
            answered = self._watched(
                "commit", lambda: self.consumer.commit(offsets=positions, asynchronous=False)
            )
            assert isinstance(answered, list)
            failed = next((tp.error for tp in answered if tp.error is not None), None)
        except KafkaException as raised:
            failed = raised.args[0]
        self._settle(
            txn,
            TxnOutcome.COMMITTED if failed is None else TxnOutcome.INDETERMINATE,
            None if failed is None else failed.name(),
        )

    def _settle(self, txn: int, outcome: TxnOutcome, error: str | None) -> None:
        self.counts[outcome.value] += 1
        self.journal.settled(
            txn,
            outcome,
            error=error,
            settled_ms=now_ms(),
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
        )

    # ---------------------------------------------------------------- progress
    def _maybe_progress(self) -> None:
        if time.monotonic() - self._last_progress >= PROGRESS_INTERVAL_S:
            self._progress(done=False)

    def _progress(self, *, done: bool, hung_in: str | None = None) -> None:
        self._last_progress = time.monotonic()
        line = {
            **self.counts,
            "assignment": sorted(self.assignment),
            "state": self.state,
            "done": done,
            "fatal": self.fatal,
            "unconfirmed_commit": self.unconfirmed_commit,
            "hung_in": hung_in,
        }
        with self._progress_lock:
            sys.stdout.write(json.dumps(line) + "\n")
            sys.stdout.flush()

    def finish(self, *_: object) -> None:
        self.finishing = True


def _identity(record: Message, run_id: str) -> tuple[str | None, int | None]:
    """(session_id, seq) of an input that is a message of the run, else (None, None)."""
    try:
        message = wire.decode(record.key(), record.value())
    except wire.MessageFormatError:
        return None, None
    return (message.session_id, message.seq) if message.run_id == run_id else (None, None)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m eoslab.workload.copy.session SPEC_JSON", file=sys.stderr)
        return 2
    spec = CopierSpec.model_validate_json(argv[0])
    signal.alarm(math.ceil(spec.max_runtime_s))
    session = CopierSession(spec)
    signal.signal(signal.SIGTERM, session.finish)
    threading.Thread(target=session.watch, name="watchdog", daemon=True).start()
    session.run()
    return 1 if session.fatal else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
