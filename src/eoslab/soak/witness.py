"""The witness: the well-behaved client beside the soak, an idempotent librdkafka producer that keeps writing
``<session>/<n>`` values to one partition, remembers every acknowledged offset, and the check
that reads the partition back (every acknowledged record there, none twice).

A fatal idempotence error ends a producer session; the next session is a new Producer (a new
producer id). Duplicates are only counted within a session, as Kafka promises. (Named a
witness, not a ledger: "ledger" is the checker's word, for the records of a run beside what its
clients said.)
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import ClassVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

from eoslab.background import Background
from eoslab.probe.client import KafkaProtocolClient
from eoslab.probe.log_reader import read_partition

WITNESS_TOPIC = "soak-witness"
PRODUCER_CONFIG: dict[str, str | int | float | bool] = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
    "message.timeout.ms": 0,  # infinite: retry through every outage
    "reconnect.backoff.ms": 20,
    "reconnect.backoff.max.ms": 200,
    "retry.backoff.ms": 20,
    "retry.backoff.max.ms": 200,
    "socket.connection.setup.timeout.ms": 2000,
    "log_level": 0,  # the outages are the point: no connection-refused lines
}
FLUSH_TIMEOUT_S = 120.0
MAX_MISPLACED_EXAMPLES = 10


@dataclass
class WitnessCheck:
    """What the read-back found."""

    acknowledged: int
    in_log: int
    lost: int
    """Acknowledged records not in the log at all."""
    misplaced: int
    """Acknowledged records in the log, but at another offset than their acknowledgement said."""
    misplaced_examples: list[dict[str, object]]
    without_offset: int
    """Records acknowledged without an offset (librdkafka's delivery report names none: the
    client deemed the record persisted without the broker saying where), found in the log or
    not (``lost`` counts them too)."""
    duplicates: int
    unacknowledged_in_log: int
    """Records whose delivery report never came or said failure, found in the log (allowed)."""
    sessions: int
    failed_sends: int
    fatal_errors: list[str]

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.duplicates == 0

    def figures(self) -> dict[str, object]:
        return {
            "acknowledged": self.acknowledged,
            "in_log": self.in_log,
            "lost": self.lost,
            "misplaced": self.misplaced,
            "misplaced_examples": self.misplaced_examples,
            "acknowledged_without_offset": self.without_offset,
            "duplicates_within_session": self.duplicates,
            "unacknowledged_in_log": self.unacknowledged_in_log,
            "producer_sessions": self.sessions,
            "failed_sends": self.failed_sends,
            "fatal_errors": self.fatal_errors,
        }


@dataclass
class WitnessProducer(Background):
    """Stops sending on ``stop()``, then waits for every outstanding delivery report."""

    bootstrap: str
    rate: float
    """Records per second (the soak's background load, not a throughput test)."""
    topic: str = WITNESS_TOPIC
    acked: dict[bytes, int | None] = field(default_factory=dict)
    """Each acknowledged value's offset, None when the delivery report named none."""
    failed: int = 0
    sessions: int = 0
    fatal_errors: list[str] = field(default_factory=list)
    sent: int = 0

    thread_name: ClassVar[str] = "soak-witness"
    join_timeout_s: ClassVar[float | None] = FLUSH_TIMEOUT_S + 10

    def __post_init__(self) -> None:
        super().__post_init__()
        self._fatal = threading.Event()

    def acknowledged(self) -> int:
        with self._lock:
            return len(self.acked)

    def highest_acked_offset(self) -> int:
        with self._lock:
            return max((o for o in self.acked.values() if o is not None), default=-1)

    def _on_delivery(self, error: KafkaError | None, msg: Message) -> None:
        value = msg.value()
        with self._lock:
            if error is None and value is not None:
                self.acked[value] = msg.offset()  # None: a report without an offset
            else:
                self.failed += 1

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self.fatal_errors.append(f"{error.name()}: {error.str()}")
            self._fatal.set()

    def _new_producer(self) -> Producer:
        self.sessions += 1
        self._fatal.clear()
        return Producer(
            {**PRODUCER_CONFIG, "bootstrap.servers": self.bootstrap, "error_cb": self._on_error}
        )

    def _run(self) -> None:
        producer = self._new_producer()
        begin = time.monotonic()
        n = 0
        while not self._stop.is_set():
            if self._fatal.is_set():  # settle this session, start the next
                producer.purge()
                producer.flush(10)
                producer = self._new_producer()
            pause = begin + n / self.rate - time.monotonic()
            if pause > 0:
                producer.poll(min(pause, 0.05))
                continue
            value = f"{self.sessions}/{n}".encode()
            try:
                producer.produce(self.topic, value, partition=0, on_delivery=self._on_delivery)
            except BufferError:
                producer.poll(0.1)
                continue
            except Exception:  # a fatal error raised by produce: the next loop settles it
                self._fatal.set()
                continue
            n += 1
            self.sent += 1
            producer.poll(0)
        producer.flush(FLUSH_TIMEOUT_S)

    def check(self, client: KafkaProtocolClient) -> WitnessCheck:
        """Read the partition back (from the reference broker) and compare it with the
        delivery reports."""
        return self.check_records(
            [(r.offset, r.value) for r in read_partition(client, self.topic, 0)]
        )

    def check_records(self, logged: list[tuple[int, bytes | None]]) -> WitnessCheck:
        """Compare the partition's records (offset, value) with the delivery reports."""
        at: dict[bytes | None, int] = {}
        for offset, value in logged:
            at.setdefault(value, offset)
        counts = Counter(value for _, value in logged)
        with self._lock:
            acked = dict(self.acked)
        lost = sum(1 for value in acked if value not in at)
        misplaced = [
            {
                "value": value.decode(errors="replace"),
                "acknowledged_at": offset,
                "found_at": at[value],
            }
            for value, offset in acked.items()
            if value in at and offset is not None and at[value] != offset
        ]
        return WitnessCheck(
            acknowledged=len(acked),
            in_log=len(logged),
            lost=lost,
            misplaced=len(misplaced),
            misplaced_examples=misplaced[:MAX_MISPLACED_EXAMPLES],
            without_offset=sum(1 for offset in acked.values() if offset is None),
            duplicates=sum(count - 1 for count in counts.values() if count > 1),
            unacknowledged_in_log=sum(1 for value in counts if value not in acked),
            sessions=self.sessions,
            failed_sends=self.failed,
            fatal_errors=list(self.fatal_errors),
        )


def _reader(bootstrap: str, isolation: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "soak-reader",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "log_level": 0,
        }
    )


def read_topic(
    bootstrap: str, topic: str, isolation: str = "read_uncommitted", timeout_s: float = 120.0
) -> list[tuple[int, bytes | None]]:
    """Every record of partition 0 up to its end now (as ``isolation`` sees it), (offset,
    value), read with a librdkafka consumer (any cluster: the leader may have moved)."""
    reader = _reader(bootstrap, isolation)
    try:
        partition = TopicPartition(topic, 0, OFFSET_BEGINNING)
        _, end = reader.get_watermark_offsets(partition, timeout=30)
        reader.assign([partition])
        records: list[tuple[int, bytes | None]] = []
        deadline = time.monotonic() + timeout_s
        while _position(reader, topic) < end:  # past markers and aborted records too
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{topic}: read {len(records)} records of {end} in {timeout_s} s"
                )
            for message in reader.consume(1000, 1.0):
                if message.error() is None:
                    records.append((int(message.offset() or 0), message.value()))
        return records
    finally:
        reader.close()


def _position(reader: Consumer, topic: str) -> int:
    (where,) = reader.position([TopicPartition(topic, 0)])
    return max(int(where.offset), 0)  # OFFSET_INVALID (-1001) before the first fetch
