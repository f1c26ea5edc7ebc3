"""A transactional producer beside the crash cycles: the transaction state must reload intact.

It writes transactions of :data:`RECORDS_PER_TXN` records (``<session>/<txn>/<i>``) to one
partition, committing each or, one in :data:`ABORT_EVERY` (the second, the seventh, ...),
aborting it (after the kills the crash cycles let it go on until one abort's records are in the
log: there to be wrongly read), and remembers how each ended as librdkafka told it: committed,
aborted, or unknown (its commit was asked for and no answer came before the session had to be
replaced). An error that requires an abort aborts; a retriable one asks again; a fatal one (or a
call that keeps failing) ends the session, and the next session's ``init_transactions`` fences
it and makes the coordinator finish what it left.

The check first starts one more session (its fencing finishes what the last one left), then
reads the partition read_committed and read_uncommitted (librdkafka consumers):
every committed transaction read whole and once, nothing of an aborted one read committed (its
records are in the log: the read_uncommitted reader finds them), an unknown one read whole or
not at all, and no transaction left open (the last stable offset is the high watermark).
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from confluent_kafka import KafkaError, KafkaException, Producer

from eoslab.admin import end_offsets
from eoslab.background import Background
from eoslab.clock import wait_until
from eoslab.soak.witness import read_topic

TXN_TOPIC = "soak-txn"
TRANSACTIONAL_ID = "soak-txn-producer"
RECORDS_PER_TXN = 5
ABORT_EVERY = 5
CALL_TIMEOUT_S = 10.0
CALL_ATTEMPTS = 6
"""A call failing retriably this many times in a row ends the session."""
PRODUCER_CONFIG: dict[str, str | int | float | bool] = {
    "transactional.id": TRANSACTIONAL_ID,
    "transaction.timeout.ms": 10_000,
    "message.timeout.ms": 10_000,
    "reconnect.backoff.ms": 20,
    "reconnect.backoff.max.ms": 200,
    "retry.backoff.ms": 20,
    "retry.backoff.max.ms": 200,
    "socket.connection.setup.timeout.ms": 2000,
    "log_level": 0,
}


class SessionEndedError(Exception):
    """The session cannot go on (fatal, or a call that kept failing): a new one takes over."""


@dataclass
class TxnProducer(Background):
    bootstrap: str
    rate: float = 20.0
    """Transactions per second."""
    outcomes: dict[str, list[list[bytes]]] = field(
        default_factory=lambda: {"committed": [], "aborted": [], "unknown": []}
    )
    sessions: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    aborts_in_log: int = 0
    """Aborts answered after every record of their transaction was acknowledged: records of an
    aborted transaction the read-back finds in the log (the check's premise)."""

    thread_name: ClassVar[str] = "soak-txn"
    join_timeout_s: ClassVar[float | None] = 120.0

    def _call(self, call_name: str, call: Callable[[], object]) -> None:
        """A transactional API call, asked again while librdkafka says it may be."""
        for _ in range(CALL_ATTEMPTS):
            try:
                call()
                return
            except KafkaException as failed:
                error: KafkaError = failed.args[0]
                self.errors[f"{call_name}: {error.name()}"] += 1
                if error.fatal() or error.txn_requires_abort() or not error.retriable():
                    raise
        raise SessionEndedError(f"{call_name} kept failing")

    def _new_session(self) -> Producer:
        while not self._stop.is_set():
            self.sessions += 1
            producer = Producer({**PRODUCER_CONFIG, "bootstrap.servers": self.bootstrap})
            try:
                self._call(
                    "init_transactions",
                    functools.partial(producer.init_transactions, CALL_TIMEOUT_S),
                )
                return producer
            except (KafkaException, SessionEndedError):
                continue
        raise SessionEndedError("stopped")

    def _transaction(self, producer: Producer, values: list[bytes], commit: bool) -> str:
        """How the transaction ended: committed, aborted, or unknown (raises SessionEndedError with
        the outcome recorded when the session must be replaced)."""
        producer.begin_transaction()
        for value in values:
            while True:
                try:
                    producer.produce(TXN_TOPIC, value, partition=0)
                    break
                except BufferError:
                    producer.poll(0.05)
        # in the log before the abort: there to be wrongly read
        all_in_log = producer.flush(CALL_TIMEOUT_S) == 0
        try:
            if commit:
                self._call(
                    "commit_transaction", lambda: producer.commit_transaction(CALL_TIMEOUT_S)
                )
                return "committed"
        except KafkaException as failed:
            if not failed.args[0].txn_requires_abort():
                return "unknown"  # asked for; the new session's fencing settles it either way
        except SessionEndedError:
            return "unknown"
        try:
            self._call("abort_transaction", lambda: producer.abort_transaction(CALL_TIMEOUT_S))
        except (KafkaException, SessionEndedError):
            return "aborted-unanswered"
        if all_in_log:
            with self._lock:
                self.aborts_in_log += 1
        return "aborted"

    def wait_for_an_abort_in_log(self, timeout_s: float) -> None:
        """Wait until an aborted transaction's records are in the log (on a loaded machine the
        kill cycles may end before the first abort, or let none be acknowledged)."""

        def found() -> bool:
            with self._lock:
                return self.aborts_in_log > 0

        wait_until(found, timeout_s, interval_s=0.1)

    def _run(self) -> None:
        begin = time.monotonic()
        number = 0
        try:
            producer = self._new_session()
        except SessionEndedError:
            return
        while not self._stop.is_set():
            pause = begin + number / self.rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            values = [f"{self.sessions}/{number}/{i}".encode() for i in range(RECORDS_PER_TXN)]
            commit = number % ABORT_EVERY != 1
            number += 1
            try:
                outcome = self._transaction(producer, values, commit)
            except KafkaException as failed:  # begin_transaction or produce refused: nothing sent
                self.errors[f"begin: {failed.args[0].name()}"] += 1
                outcome = "aborted-unanswered"
            # an abort nobody answered is still an abort: no commit was ever asked for
            kept = "aborted" if outcome == "aborted-unanswered" else outcome
            with self._lock:
                self.outcomes[kept].append(values)
            if outcome in ("unknown", "aborted-unanswered"):
                try:
                    producer = self._new_session()
                except SessionEndedError:
                    return

    def check(self) -> dict[str, object]:
        """Read the partition back both ways and hold each transaction's outcome against it.
        First a new session of the transactional id, as a restarted application's: its
        fencing makes the coordinator finish whatever the last session left (an unanswered
        commit completes, an open transaction aborts), so nothing may stay open after it."""
        closer = Producer({**PRODUCER_CONFIG, "bootstrap.servers": self.bootstrap})
        closer.init_transactions(60.0)
        committed_read = Counter(
            v for _, v in read_topic(self.bootstrap, TXN_TOPIC, "read_committed")
        )
        in_log = Counter(v for _, v in read_topic(self.bootstrap, TXN_TOPIC, "read_uncommitted"))
        with self._lock:
            outcomes = {name: list(txns) for name, txns in self.outcomes.items()}
        return {
            **judge(outcomes, committed_read, in_log),
            "sessions": self.sessions,
            "errors": dict(self.errors.most_common(10)),
            "last_stable_offset": end_offsets(self.bootstrap, TXN_TOPIC, 1, "read_committed")[0],
            "high_watermark": end_offsets(self.bootstrap, TXN_TOPIC, 1)[0],
        }


def judge(
    outcomes: dict[str, list[list[bytes]]],
    committed_read: Counter[bytes | None],
    in_log: Counter[bytes | None],
) -> dict[str, object]:
    """Each transaction's outcome held against what the read_committed reader read (and what
    the log holds): the anomalies, named as the lab's transaction checks name them."""
    return {
        "transactions": {name: len(txns) for name, txns in outcomes.items()},
        "lost_committed": sum(
            1 for txn in outcomes["committed"] for v in txn if committed_read[v] == 0
        ),
        "aborted_read": sum(committed_read[v] for txn in outcomes["aborted"] for v in txn),
        "aborted_records_in_log": sum(in_log[v] > 0 for txn in outcomes["aborted"] for v in txn),
        "duplicates": sum(count - 1 for count in committed_read.values() if count > 1),
        "torn": sum(
            1
            for txn in outcomes["committed"] + outcomes["unknown"]
            if 0 < sum(committed_read[v] > 0 for v in txn) < len(txn)
        ),
    }
