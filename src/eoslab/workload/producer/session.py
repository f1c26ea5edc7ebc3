"""One producer session, as its own OS process:
``python -m eoslab.workload.producer.session SPEC_JSON``.

A process of its own so the nemesis can kill -9 it as a real crash. It sends the session's
planned records (message format v1), journals every send, writes each record's final
outcome to the history ledger, librdkafka statistics to stats.jsonl, and one JSON progress
line to stdout every PROGRESS_INTERVAL_S (the supervisor reads them).

SIGTERM ends the session early but cleanly: stop sending, wait for outstanding reports.

A **warm start** (``warm_start``, the run's first sessions when no fault is in place before
them): the session's first progress line, which the workload's start waits for, comes only once
its first record has its outcome (bounded by WARM_UP_TIMEOUT_S), and its rate and duration count
from then. A client's first acknowledgement can come seconds after its first send (metadata, the
producer id, a JVM's first requests: up to 4.8 s in the matrix of 2026-12-07); a fault clock
started at the first send met a workload that had not flowed yet (a leader killed before it
had acknowledged anything alone, a dropped Produce that never came).

A **fatal** client error (librdkafka raises it on an idempotence failure it cannot recover
from, e.g. OUT_OF_ORDER_SEQUENCE_NUMBER after a possibly-persisted batch, librdkafka #3584) is
an observation, not a crash: whichever call raises it (poll, produce, flush, purge), the session
stops sending, settles what it sent (its delivery reports, the rest purged), reports the error,
its reason and the records it left unsent on its last progress line, and exits 0.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message
from pydantic import BaseModel, ConfigDict

from eoslab import message as wire
from eoslab.clients import ClientLaunch
from eoslab.clock import now_ms
from eoslab.rundir import Outcome, RunDir
from eoslab.workload.drivers.api import ClientApi, ProducerApi
from eoslab.workload.producer.history import HistoryWriter, SendJournal
from eoslab.workload.producer.outcomes import outcome_of
from eoslab.workload.producer.plan import KeySpace, PlannedRecord, RecordStream
from eoslab.workload.producer.stats import stats_sample
from eoslab.workload.spec import TransactionSpec

PROGRESS_INTERVAL_S = 0.2
QUEUE_FULL_PATIENCE_S = 10.0
PURGE_GRACE_S = 5.0
WARM_UP_TIMEOUT_S = 30.0
"""How long a warm start waits for its first record's outcome before it says it is ready."""

DeliveryCallback = Callable[[KafkaError | None, Message], None]


class SessionSpec(BaseModel):
    """Everything one producer session needs (the supervisor passes it as JSON)."""

    model_config = ConfigDict(extra="forbid")

    run_dir: Path
    run_id: str
    session_id: str
    producer: int
    session_index: int
    bootstrap: str
    topic: str
    partitions: int
    config: dict[str, str | int | float | bool]
    records: int | None = None
    duration_s: float | None = None
    rate: float | None = None
    """Records per second for this session; None: as fast as librdkafka takes them."""
    value_size: int = 100
    keys: int = 64
    seed: int = 0
    flush_timeout_s: float = 30.0
    transactions: TransactionSpec | None = None
    """Set for a transactional session (:mod:`eoslab.workload.transactions.session` runs it)."""
    transactional_id: str | None = None
    client: ClientLaunch | None = None
    """The client the session runs (None: the workload's own librdkafka)."""
    warm_start: bool = False
    """Ready once the first record sent has its outcome; rate and duration count from then."""


def drain(
    producer: ProducerApi,
    timeout_s: float,
    guarded: Callable[[Callable[[], Any]], Any],
    between: Callable[[], object] = lambda: None,
) -> int | None:
    """``flush()``, as a loop of polls: the messages left after ``timeout_s`` (None when a
    fatal error was raised: ``guarded`` records it and returns None); ``between`` is called
    after each poll (a session's progress lines go on while it waits). Not ``flush()`` itself:
    confluent-kafka raises a fatal error from inside the call serving librdkafka's callbacks,
    and where ``poll()`` then returns, ``flush()`` goes on serving delivery reports with the
    exception set, which fail (``SystemError: <built-in function time_ns> returned a result
    with an exception set``, confluent-kafka 2.16.1: a fenced zombie's late writes refused),
    their outcomes lost. Unlike ``flush()`` it does not cut ``linger.ms`` short for what is
    queued."""
    deadline = time.monotonic() + timeout_s
    while (left := len(producer)) > 0:
        wait_s = min(deadline - time.monotonic(), 0.05)
        if wait_s <= 0:
            return left
        if guarded(partial(producer.poll, wait_s)) is None:
            return None
        between()
    return 0


class ProducerSession:
    def __init__(self, spec: SessionSpec) -> None:
        self.spec = spec
        self.run_dir = RunDir(spec.run_dir)
        self.counts: Counter[str] = Counter()
        self.stopping = False
        self.fatal: str | None = None
        self.fatal_reason: str | None = None
        self.planned_left = 0
        self.history = HistoryWriter(self.run_dir, spec.run_id, spec.session_id, spec.producer)
        self.journal = SendJournal(self.run_dir.journal_file(spec.session_id))
        self.stream = RecordStream(
            KeySpace(spec.keys, spec.partitions, spec.seed),
            spec.seed,
            spec.producer,
            spec.session_index,
        )
        self.client = ClientApi(spec.client)
        self.producer = self.client.producer(
            {
                **spec.config,
                "bootstrap.servers": spec.bootstrap,
                "stats_cb": self._on_stats,
                "error_cb": self._on_error,
            }
        )
        self._last_progress = 0.0
        self._stats_samples = 0
        self._epoch = 0
        """The producer epoch librdkafka's statistics last showed: an idempotent producer
        starts at 0 with a new PID, so this is how often it was bumped."""
        self.producer_id: int | None = None
        """The producer id librdkafka's statistics last showed (None before the first)."""
        self._warming = spec.warm_start
        self._origin = time.monotonic()
        """Where the session's rate and duration count from (after a warm start's warm-up)."""

    # ---------------------------------------------------------------- callbacks
    def _on_stats(self, raw: str) -> None:
        self._stats_samples += 1
        sample = stats_sample(raw, self.spec.producer, self.spec.session_id, now_ms())
        self.run_dir.append_jsonl(self.run_dir.stats_jsonl, sample)
        eos = sample.get("eos", {})
        epoch, producer_id = eos.get("producer_epoch", -1), eos.get("producer_id", -1)
        if isinstance(epoch, int) and epoch >= 0:
            self._epoch = epoch
        if isinstance(producer_id, int) and producer_id >= 0:
            self.producer_id = producer_id

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self._on_fatal(error)
        self.client.log_error(error)

    def _on_fatal(self, error: KafkaError) -> None:
        if self.fatal is None:
            self.fatal, self.fatal_reason = error.name(), error.str()

    def _guarded(self, call: Callable[[], Any]) -> Any:
        """``call()``; a fatal error it raises is recorded (None returned), anything else
        propagates."""
        try:
            return call()
        except KafkaException as raised:
            error = raised.args[0]
            if not isinstance(error, KafkaError) or not error.fatal():
                raise
            self._on_fatal(error)
            return None

    def _reporter(self, record: PlannedRecord, send_ms: int) -> DeliveryCallback:
        def on_delivery(error: KafkaError | None, msg: Message) -> None:
            ack_ms = now_ms()
            name = None if error is None else error.name()
            outcome = outcome_of(name)
            latency = msg.latency()
            self._record(
                record,
                send_ms,
                outcome,
                offset=msg.offset() if outcome is Outcome.ACK else None,
                error=name,
                ack_ms=ack_ms,
                latency_ms=latency * 1000.0 if latency is not None else float(ack_ms - send_ms),
            )

        return on_delivery

    def _record(self, record: PlannedRecord, send_ms: int, outcome: Outcome, **fields: Any) -> None:
        self.counts[outcome.value] += 1
        self.history.add(
            partition=record.partition,
            seq=record.seq,
            key=record.key,
            key_seq=record.key_seq,
            send_ms=send_ms,
            outcome=outcome,
            **fields,
        )

    # ---------------------------------------------------------------- sending
    def run(self) -> None:
        spec = self.spec
        self._origin = time.monotonic()
        sent = 0
        while self._live:
            if spec.records is not None and sent >= spec.records:
                break
            if self._past_duration():
                break
            if spec.rate:
                self._wait_until(self._due(sent))
                if self.stopping:
                    break
            self._send(self.stream.next())
            sent += 1
            self._guarded(lambda: self.producer.poll(0))
            self._warm_up()
            self._housekeeping()
        if spec.records is not None:
            self.planned_left = spec.records - sent
        self._finish()

    def _due(self, sent: int) -> float:
        """When the record after ``sent`` records is due at the session's rate (at once
        without one)."""
        return self._origin + sent / self.spec.rate if self.spec.rate else 0.0

    def _past_duration(self) -> bool:
        duration = self.spec.duration_s
        return duration is not None and time.monotonic() >= self._origin + duration

    def _wait_until(self, moment: float) -> None:
        while self._live and (left := moment - time.monotonic()) > 0:
            self._guarded(lambda: self.producer.poll(min(left, 0.05)))
            self._housekeeping()

    def _warm_up(self) -> None:
        """A warm start, after its first send: wait (bounded) for that record's outcome, then
        count the rate and duration from now and say the session is ready."""
        if not self._warming:
            return
        deadline = time.monotonic() + WARM_UP_TIMEOUT_S
        while self._live and self._outcomes == 0 and time.monotonic() < deadline:
            self._guarded(lambda: self.producer.poll(0.05))
            self.history.maybe_flush()
        self._warming = False
        self._origin = time.monotonic()
        self._progress(done=False)

    @property
    def _outcomes(self) -> int:
        """Records with a final outcome so far."""
        return sum(self.counts[o.value] for o in (Outcome.ACK, Outcome.FAIL, Outcome.INDETERMINATE))

    @property
    def _live(self) -> bool:
        return not self.stopping and self.fatal is None

    def _send(self, record: PlannedRecord) -> None:
        spec = self.spec
        msg = wire.Message(
            spec.run_id,
            spec.session_id,
            spec.producer,
            record.partition,
            record.seq,
            record.key,
            record.key_seq,
        )
        msg = dataclasses.replace(msg, padding=wire.padding_for(msg, spec.value_size))
        value = wire.encode_value(msg)
        send_ms = now_ms()
        self.journal.record(record.partition, record.seq, record.key, record.key_seq, send_ms)
        self.counts["sent"] += 1
        patience = time.monotonic() + QUEUE_FULL_PATIENCE_S
        while True:
            try:
                self.producer.produce(
                    spec.topic,
                    value=value,
                    key=wire.encode_key(msg),
                    partition=record.partition,
                    on_delivery=self._reporter(record, send_ms),
                )
                return
            except BufferError:
                if time.monotonic() > patience:
                    self._record(record, send_ms, Outcome.FAIL, error="_QUEUE_FULL")
                    return
                self._guarded(lambda: self.producer.poll(0.05))
            except KafkaException as refused:
                error = refused.args[0]
                if error.fatal():
                    self._on_fatal(error)
                self._record(record, send_ms, Outcome.FAIL, error=error.name())
                return

    def _finish(self) -> None:
        timeout_s = PURGE_GRACE_S if self.fatal is not None else self.spec.flush_timeout_s
        left = self._drain(timeout_s)
        if left or left is None:
            self._guarded(lambda: self.producer.purge(in_queue=True, in_flight=True))
            self._drain(PURGE_GRACE_S)
        self.history.flush()
        self.journal.close()
        self._await_final_stats()
        self._progress(done=True)

    def _drain(self, timeout_s: float) -> int | None:
        """``flush()``, as a loop of polls (:func:`drain`), the progress lines going on: the
        acknowledgements that arrive meanwhile are what ``after_acked`` steps wait for (a run
        of 2026-12-07 sent its last record, then waited 3 s for the last 1,000 acks with its
        count frozen, and a step due at 1,000 started after a broker's 24 s restart)."""
        return drain(self.producer, timeout_s, self._guarded, self._housekeeping)

    def _await_final_stats(self) -> None:
        """One more statistics sample after the flush: the session's final counters."""
        interval_ms = int(self.spec.config.get("statistics.interval.ms", 0))
        samples = self._stats_samples
        deadline = time.monotonic() + 1.5 * interval_ms / 1000
        while interval_ms and self._stats_samples == samples and time.monotonic() < deadline:
            self._guarded(lambda: self.producer.poll(0.05))

    def _housekeeping(self) -> None:
        """The history flushed now and then, and a progress line every PROGRESS_INTERVAL_S
        (none while a warm start warms up: its first line says it is ready)."""
        self.history.maybe_flush()
        if not self._warming and time.monotonic() - self._last_progress >= PROGRESS_INTERVAL_S:
            self._progress(done=False)

    def _progress(self, *, done: bool) -> None:
        self._last_progress = time.monotonic()
        sys.stdout.write(json.dumps(self._progress_line(done=done)) + "\n")
        sys.stdout.flush()

    def _progress_line(self, *, done: bool) -> dict[str, Any]:
        """What the supervisor learns of the session (its last line is the session's end)."""
        return {
            **self.counts,
            "done": done,
            "fatal": self.fatal,
            "fatal_reason": self.fatal_reason,
            "unsent": self.planned_left,
            "epoch_bumps": self._epoch,
            "producer_id": self.producer_id,
            "producer_epoch": None if self.producer_id is None else self._epoch,
        }

    def ready(self) -> None:
        """The client is made (a driver program started): a first progress line says so, and
        the workload's start waits for it (a JVM takes a second or more to start); a warm
        start says so later, once its first record has its outcome (:meth:`_warm_up`)."""
        if not self._warming:
            self._progress(done=False)

    def stop(self, *_: object) -> None:
        self.stopping = True


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m eoslab.workload.producer.session SPEC_JSON", file=sys.stderr)
        return 2
    session = ProducerSession(SessionSpec.model_validate_json(argv[0]))
    signal.signal(signal.SIGTERM, session.stop)
    session.ready()
    session.run()
    session.client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
