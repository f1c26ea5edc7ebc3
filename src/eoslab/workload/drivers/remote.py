"""The session's half of the driver line protocol (:mod:`eoslab.workload.drivers.contract`): a
client that lives in a driver program (Kafka's Java client, franz-go), with librdkafka's API —
the one the roles are written against (:mod:`eoslab.workload.drivers.api`).

:class:`DriverProcess` starts the program, reads its lines on a thread of its own, and answers
the roles' calls; callbacks are served as librdkafka serves them: delivery reports, statistics,
errors and commit reports when the role polls (or consumes, or waits in a call), rebalance
callbacks inside the consume that got them (the driver waits for ``resume`` meanwhile).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import queue
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException, Message, TopicPartition

from eoslab.clients import ClientLaunch
from eoslab.workload.drivers.contract import Line, raw, record

PARTITION_EOF = KafkaError._PARTITION_EOF
DRIVER_GONE = KafkaError._FATAL
EXIT_GRACE_S = 5.0
FLUSH_BYTES = 1 << 16
PIPE_BYTES = 1 << 20
"""The pipe to the driver holds this much (Linux's default, 64 KiB, is one FLUSH_BYTES: the
session waited on the driver's every read)."""
FLUSH_INTERVAL_S = 0.001
"""A poll that does not wait sends what is written once this much is pending or this long has
passed: not a write per record (the producer polls after every one)."""
DEFAULT_CALL_TIMEOUT_S = 30.0

Config = dict[str, Any]
Delivered = Callable[[int, int, "int | None", "Line | None"], None]
"""A produced record's outcome: token, partition, offset (None: acknowledged without one), the
ERROR it failed with (None: acknowledged)."""
Translate = Callable[[Config], tuple[dict[str, str], int]]
"""librdkafka properties → (the driver's native properties, statistics interval in ms)."""


def kafka_error(error: Line) -> KafkaError:
    """A protocol ERROR as the KafkaError librdkafka would have given (its name by the code)."""
    return KafkaError(
        int(error["code"]),
        str(error.get("reason") or ""),
        fatal=bool(error.get("fatal")),
        retriable=bool(error.get("retriable")),
        txn_requires_abort=bool(error.get("abortable")),
    )


def _seconds_ms(timeout: float | None, default_s: float = DEFAULT_CALL_TIMEOUT_S) -> int:
    """A librdkafka timeout (seconds; None or negative: the default) in milliseconds."""
    return int(1000 * (default_s if timeout is None or timeout < 0 else timeout))


class DriverProcess:
    """One driver program, shared by every client object of the session (a copier's producer
    sends its consumer's group metadata with its offsets: they must live in one program)."""

    def __init__(self, launch: ClientLaunch) -> None:
        self.launch = launch
        self._process = subprocess.Popen(
            list(launch.command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=FLUSH_BYTES
        )
        assert self._process.stdin is not None
        self._stdin = self._process.stdin
        with contextlib.suppress(OSError):  # a user over its pipe quota keeps the default
            fcntl.fcntl(self._stdin.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        self._inbox: queue.SimpleQueue[Line | None] = queue.SimpleQueue()
        self._pending = 0
        self._flushed = time.monotonic()
        self._stashed: deque[Line] = deque()
        self._ids = itertools.count(1)
        self._handles = itertools.count(1)
        self.tokens = itertools.count(1)
        self.deliveries: dict[int, Delivered] = {}
        self._records = bytearray()
        self._records_for: tuple[str, str] | None = None
        self._listeners: dict[str, Callable[[Line], None]] = {}
        self._rebalance: dict[str, Callable[[Line], None]] = {}
        threading.Thread(target=self._read, name="driver-lines", daemon=True).start()
        hello = self.call({"op": "hello"})
        self.version = str(hello.get("version"))
        if self.version != launch.version.removeprefix("v"):
            self.close()
            raise KafkaException(
                KafkaError(
                    DRIVER_GONE,
                    f"the {launch.family} driver runs client {self.version}, not {launch.version}",
                    fatal=True,
                )
            )

    # ---------------------------------------------------------------- lines
    def _read(self) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        for line in stdout:
            try:
                self._inbox.put(json.loads(line))
            except ValueError:
                continue
        self._inbox.put(None)

    def write(self, line: Line) -> None:
        """A command without a reply (buffered: sent by the next flush, call or serve)."""
        self._write_records()
        self._write(json.dumps(line, separators=(",", ":")).encode() + b"\n")

    def _write(self, data: bytes | bytearray) -> None:
        self._pending += len(data)
        self._stdin.write(data)

    def produce(self, handle: str, topic: str, token: int, data: bytes) -> None:
        """A record for ``handle``'s producer (buffered with the ones before it into one
        ``produce`` command: sent before any other command, or once FLUSH_BYTES are held)."""
        if self._records_for != (handle, topic):
            self._write_records()
            self._records_for = (handle, topic)
        self._records += data
        if len(self._records) >= FLUSH_BYTES:
            self._write_records()

    def _write_records(self) -> None:
        if not self._records or self._records_for is None:
            return
        handle, topic = self._records_for
        header = {"op": "produce", "handle": handle, "topic": topic, "bytes": len(self._records)}
        self._write(json.dumps(header, separators=(",", ":")).encode() + b"\n")
        self._write(self._records)
        self._records = bytearray()

    def flush(self) -> None:
        self._write_records()
        self._pending = 0
        self._flushed = time.monotonic()
        try:
            self._stdin.flush()
        except (BrokenPipeError, ValueError):
            raise KafkaException(
                KafkaError(DRIVER_GONE, "the client driver exited", fatal=True)
            ) from None

    def new_handle(self, kind: str) -> str:
        return f"{kind}{next(self._handles)}"

    def listen(
        self,
        handle: str,
        on_event: Callable[[Line], None],
        on_rebalance: Callable[[Line], None] | None = None,
    ) -> None:
        self._listeners[handle] = on_event
        if on_rebalance is not None:
            self._rebalance[handle] = on_rebalance

    # ---------------------------------------------------------------- calls and events
    def call(self, command: Line) -> Any:
        """Send a command and wait for its reply (serving rebalance callbacks meanwhile; other
        events wait for the next poll); KafkaException with the client's error."""
        number = next(self._ids)
        self.write({**command, "id": number})
        self.flush()
        while True:
            line = self._next(None)
            if line is None:
                raise KafkaException(
                    KafkaError(DRIVER_GONE, "the client driver exited", fatal=True)
                )
            if line.get("re") == number:
                if "error" in line:
                    raise KafkaException(kafka_error(line["error"]))
                return line.get("ok")
            if line.get("ev") == "rebalance":
                self._rebalance[line["handle"]](line)
                self.write({"op": "resume"})
                self.flush()
            elif "ev" in line:
                self._stashed.append(line)

    def serve(self, timeout_s: float | None) -> int:
        """Serve waiting events, waiting up to ``timeout_s`` for the first; how many. What is
        written is sent first, unless the poll does not wait and little is pending."""
        if (
            timeout_s != 0
            or self._pending + len(self._records) >= FLUSH_BYTES
            or time.monotonic() - self._flushed >= FLUSH_INTERVAL_S
        ):
            self.flush()
        served = 0
        while self._stashed:
            served += self._dispatch(self._stashed.popleft())
        if timeout_s == 0:  # the producer's poll after every record: no exception when idle
            while not self._inbox.empty():  # only this thread takes from it
                line = self._inbox.get_nowait()
                if line is None:  # the driver is gone (as the waiting loop below)
                    break
                served += self._dispatch(line)
            return served
        deadline = None if timeout_s is None else time.monotonic() + max(0.0, timeout_s)
        while True:
            wait = None if deadline is None else deadline - time.monotonic()
            line = self._next(0 if served else (max(0.0, wait) if wait is not None else None))
            if line is None:
                return served
            served += self._dispatch(line)

    def _next(self, timeout_s: float | None) -> Line | None:
        try:
            return (
                self._inbox.get(timeout=timeout_s) if timeout_s != 0 else self._inbox.get_nowait()
            )
        except queue.Empty:
            return None

    def _dispatch(self, line: Line) -> int:
        """Serve one line's events; how many."""
        kind = line.get("ev")
        if kind == "acks":
            acks = line["acks"]
            for at in range(0, len(acks), 3):
                token, partition, offset = acks[at : at + 3]
                if callback := self.deliveries.pop(token, None):
                    callback(token, partition, offset, None)
            return len(acks) // 3
        if kind == "delivery":
            token = int(line["token"])
            if callback := self.deliveries.pop(token, None):
                callback(token, int(line["partition"]), line.get("offset"), line.get("error"))
        elif "handle" in line and line["handle"] in self._listeners:
            self._listeners[line["handle"]](line)
        return 1

    def close(self) -> None:
        """Ask the driver to exit (it halts at once) and reap it."""
        try:
            self.write({"op": "exit"})
            self._stdin.close()
        except (BrokenPipeError, ValueError, OSError):
            pass
        try:
            self._process.wait(EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


# ==================================================================================== producer
@dataclass(slots=True)
class _Sent:
    topic: str
    key: bytes | None
    value: bytes | None
    partition: int
    at: float
    on_delivery: Callable[[KafkaError | None, Message], None] | None


class RemoteProducer:
    """librdkafka's Producer, on a driver's client."""

    def __init__(
        self,
        driver: DriverProcess,
        config: Config,
        translate: Translate,
        consumer: RemoteConsumer | None = None,
    ) -> None:
        self._driver = driver
        self._stats_cb = config.get("stats_cb")
        self._error_cb = config.get("error_cb")
        self._on_delivery = config.get("on_delivery")
        native, stats_ms = translate(config)
        self.handle = driver.new_handle("p")
        self._outstanding: dict[int, _Sent] = {}
        driver.listen(self.handle, self._on_event)
        driver.call(
            {
                "op": "producer",
                "handle": self.handle,
                "config": native,
                "stats_ms": stats_ms,
                **({} if consumer is None else {"consumer": consumer.handle}),
            }
        )

    def produce(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        partition: int = -1,
        *,
        on_delivery: Callable[[KafkaError | None, Message], None] | None = None,
    ) -> None:
        if partition < 0:
            raise KafkaException(
                KafkaError(KafkaError._INVALID_ARG, "the driver needs a partition")
            )
        token = next(self._driver.tokens)
        value_bytes = value.encode() if isinstance(value, str) else value
        key_bytes = key.encode() if isinstance(key, str) else key
        self._outstanding[token] = _Sent(
            topic,
            key_bytes,
            value_bytes,
            partition,
            time.monotonic(),
            on_delivery or self._on_delivery,
        )
        self._driver.deliveries[token] = self._delivered
        self._driver.produce(
            self.handle, topic, token, record(token, partition, key_bytes, value_bytes)
        )

    def _delivered(
        self, token: int, partition: int, offset: int | None, failed: Line | None
    ) -> None:
        sent = self._outstanding.pop(token)
        if sent.on_delivery is None:
            return
        error = None if failed is None else kafka_error(failed)
        # positional (topic, partition, offset, key, value, headers, error, timestamp, latency):
        # 0.2 µs a record, against 0.8 µs by keyword
        message = Message(
            sent.topic,
            partition,
            OFFSET_INVALID if offset is None else offset,
            sent.key,
            sent.value,
            None,
            error,
            None,
            time.monotonic() - sent.at,
        )
        sent.on_delivery(error, message)

    def _on_event(self, line: Line) -> None:
        if line["ev"] == "stats" and self._stats_cb is not None:
            self._stats_cb(json.dumps(librdkafka_stats(line["stats"], len(self._outstanding))))
        elif line["ev"] == "error" and self._error_cb is not None:
            self._error_cb(kafka_error(line["error"]))

    def poll(self, timeout: float | None = None) -> int:
        return self._driver.serve(-1 if timeout is None else timeout)

    def __len__(self) -> int:
        return len(self._outstanding)

    def flush(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._outstanding and (deadline is None or time.monotonic() < deadline):
            self.poll(0.05)
        return len(self._outstanding)

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        self._driver.call({"op": "purge", "handle": self.handle})

    def burst(self, topic: str, partition: int, count: int, value_bytes: int) -> dict[str, float]:
        """The client's own rate, the line protocol left out (`make bench`'s comparison point
        for a driver): ``count`` values of ``value_bytes`` sent by the driver program itself, as
        fast as its client takes them, every acknowledgement waited for; its seconds and how
        many failed."""
        return dict(
            self._driver.call(
                {
                    "op": "produce_burst",
                    "handle": self.handle,
                    "topic": topic,
                    "partition": partition,
                    "count": count,
                    "value_bytes": value_bytes,
                }
            )
        )

    def _transactional(self, op: str, timeout: float | None, **fields: Any) -> None:
        self._driver.call(
            {"op": op, "handle": self.handle, "timeout_ms": _seconds_ms(timeout), **fields}
        )

    def init_transactions(self, timeout: float | None = None) -> None:
        self._transactional("init_transactions", timeout)

    def begin_transaction(self) -> None:
        self._transactional("begin_transaction", None)

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._transactional("commit_transaction", timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._transactional("abort_transaction", timeout)

    def send_offsets_to_transaction(
        self,
        positions: Sequence[TopicPartition],
        group_metadata: GroupMetadata,
        timeout: float | None = None,
    ) -> None:
        self._transactional(
            "send_offsets_to_transaction",
            timeout,
            offsets=[[tp.topic, tp.partition, tp.offset] for tp in positions],
            group_metadata=group_metadata.snapshot,
        )


def librdkafka_stats(stats: Line, outstanding: int) -> Line:
    """A driver's statistics in the shape of librdkafka's (what
    :mod:`eoslab.workload.producer.stats` reads): the producer id and epoch, records sent, and
    the retries the client counted."""
    return {
        "txmsgs": stats.get("record-send-total"),
        "msg_cnt": outstanding,
        "eos": {
            "producer_id": stats.get("producer_id", -1),
            "producer_epoch": stats.get("producer_epoch", -1),
        },
        "brokers": {},
        "driver": {"retries": stats.get("record-retry-total"), **stats},
    }


# ==================================================================================== consumer
@dataclass(frozen=True)
class GroupMetadata:
    """A consumer's group membership as the driver snapshotted it (for a transactional
    producer's offsets, and the consumption ledger's member id and generation)."""

    snapshot: int
    generation: int
    member_id: str


@dataclass(frozen=True)
class CommitResult:
    """One partition of a commit's answer (librdkafka's TopicPartition with its error)."""

    topic: str
    partition: int
    offset: int
    error: KafkaError | None


Rebalance = Callable[[Any, list[TopicPartition]], None]


class RemoteConsumer:
    """librdkafka's Consumer, on a driver's client."""

    def __init__(self, driver: DriverProcess, config: Config, translate: Translate) -> None:
        self._driver = driver
        self._error_cb = config.get("error_cb")
        self._on_commit = config.get("on_commit")
        native, _ = translate(config)
        self.handle = driver.new_handle("c")
        self._callbacks: dict[str, Rebalance | None] = {}
        self._ends: dict[tuple[str, int], int] = {}
        """Each partition's end as the client's last fetch of it said (the items' "hw")."""
        driver.listen(self.handle, self._on_event, self._rebalanced)
        driver.call(
            {
                "op": "consumer",
                "handle": self.handle,
                "config": native,
                "eof": str(config.get("enable.partition.eof", False)).lower() == "true",
            }
        )

    def _call(self, op: str, **fields: Any) -> Any:
        return self._driver.call({"op": op, "handle": self.handle, **fields})

    def subscribe(
        self,
        topics: list[str],
        on_assign: Rebalance | None = None,
        on_revoke: Rebalance | None = None,
        on_lost: Rebalance | None = None,
    ) -> None:
        self._callbacks = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost or on_revoke}
        self._call("subscribe", topics=topics)

    def _rebalanced(self, line: Line) -> None:
        callback = self._callbacks.get(line["kind"])
        if callback is not None:
            callback(self, [TopicPartition(t, p) for t, p in line["partitions"]])

    def _on_event(self, line: Line) -> None:
        if line["ev"] == "commit" and self._on_commit is not None:
            self._on_commit(None, [TopicPartition(t, p, o) for t, p, o in line["offsets"]])
        elif line["ev"] == "error" and self._error_cb is not None:
            self._error_cb(kafka_error(line["error"]))

    def assign(self, partitions: list[TopicPartition]) -> None:
        self._call("assign", partitions=[[tp.topic, tp.partition, tp.offset] for tp in partitions])

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """The client's records; an error it will get past by itself (retriable, not fatal: the
        Java client's offset lookup timing out while its broker restarts) is no record and an
        error callback, as librdkafka retries such errors inside its poll, not raised: a
        reader raising it died with the topic half read (`make conformance`, 2026-12-07)."""
        try:
            items = self._call("consume", max=num_messages, timeout_ms=_seconds_ms(timeout, 1.0))
        except KafkaException as raised:
            error = raised.args[0]
            if error.fatal() or not error.retriable():
                raise
            if self._error_cb is not None:
                self._error_cb(error)
            else:
                print(f"consume: {error.name()}: {error.str()}", file=sys.stderr, flush=True)
            return []
        self._driver.serve(0)
        for item in items:
            if "hw" in item:
                self._ends[item["t"], int(item["p"])] = int(item["hw"])
        return [_message(item) for item in items]

    def poll(self, timeout: float | None = None) -> Message | None:
        messages = self.consume(1, -1 if timeout is None else timeout)
        return messages[0] if messages else None

    def commit(
        self,
        message: Message | None = None,
        offsets: list[TopicPartition] | None = None,
        asynchronous: bool = True,
    ) -> list[CommitResult]:
        if asynchronous or offsets is None:
            raise KafkaException(
                KafkaError(KafkaError._INVALID_ARG, "the driver commits given offsets, in sync")
            )
        answer = self._call(
            "commit", offsets=[[tp.topic, tp.partition, tp.offset] for tp in offsets]
        )
        return [
            CommitResult(t, p, o, None if error is None else kafka_error(error))
            for t, p, o, error in answer
        ]

    def committed(
        self, partitions: list[TopicPartition], timeout: float | None = None
    ) -> list[TopicPartition]:
        answer = self._call(
            "committed",
            partitions=[[tp.topic, tp.partition] for tp in partitions],
            timeout_ms=_seconds_ms(timeout),
        )
        return [TopicPartition(t, p, o) for t, p, o in answer]

    def seek(self, partition: TopicPartition) -> None:
        self._call("seek", position=[partition.topic, partition.partition, partition.offset])

    def pause(self, partitions: list[TopicPartition]) -> None:
        self._call("pause", partitions=[[tp.topic, tp.partition] for tp in partitions])

    def resume(self, partitions: list[TopicPartition]) -> None:
        self._call("resume_partitions", partitions=[[tp.topic, tp.partition] for tp in partitions])

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        """Asked of the cluster; ``cached``: the end the client's last fetch of the partition
        said, without a call (as librdkafka's: its low offset unknown here)."""
        if cached:
            return OFFSET_INVALID, self._ends.get(
                (partition.topic, partition.partition), OFFSET_INVALID
            )
        low, high = self._call(
            "watermarks",
            position=[partition.topic, partition.partition],
            timeout_ms=_seconds_ms(timeout),
        )
        return int(low), int(high)

    def consumer_group_metadata(self) -> GroupMetadata:
        answer = self._call("group_metadata")
        return GroupMetadata(int(answer["id"]), int(answer["generation"]), str(answer["member_id"]))

    def close(self) -> None:
        self._call("close_consumer", timeout_ms=_seconds_ms(None))
        self._driver.serve(0)


def _message(item: Line) -> Message:
    """A consumed record (or an end-of-partition item) as librdkafka's Message."""
    if item.get("eof"):
        return Message(
            topic=item["t"],
            partition=int(item["p"]),
            offset=int(item["o"]),
            error=KafkaError(PARTITION_EOF),
        )
    return Message(
        topic=item["t"],
        partition=int(item["p"]),
        offset=int(item["o"]),
        key=raw(item.get("k")),
        value=raw(item.get("v")),
        timestamp=(1, int(item.get("ts", 0))),
    )
