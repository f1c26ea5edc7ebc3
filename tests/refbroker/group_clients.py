"""Real group consumers for the tests, each driven with a deadline: librdkafka (confluent-kafka),
Kafka's own Java VerifiableConsumer (kafka-tools 3.9, its JSON event lines parsed), aiokafka,
kcat -G and a franz-go program (franzgo/main.go, built with the machine's go against the
current franz-go, go.mod, and against franz-go 1.21.0, go121.mod); librdkafka's and franz-go's
regex subscriptions, which see the topics a cluster lists.

librdkafka waits silently forever when the broker lacks something, so nothing here blocks
without a bound: every wait polls until its condition holds or its deadline passes, and then
fails with what it saw.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer, KafkaError, TopicPartition

from eoslab.settings import kafka_lib

WAIT_S = 60.0
FRANZGO_SOURCE = Path(__file__).parent / "franzgo"
BUILD_TIMEOUT_S = 600.0
GROUP_SETTINGS: dict[str, Any] = {
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "session.timeout.ms": 6000,  # Kafka's group.min.session.timeout.ms
    "heartbeat.interval.ms": 500,
}


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout_s} s")
        time.sleep(0.05)


class RdkafkaMember:
    """A confluent-kafka consumer in a group (subscribe()); polled only when the test says so."""

    def __init__(self, bootstrap: str, group: str, topic: str, **overrides: Any) -> None:
        settings = {"bootstrap.servers": bootstrap, "group.id": group, **GROUP_SETTINGS}
        self.consumer = Consumer({**settings, **overrides})
        self.consumer.subscribe([topic], on_assign=self._on_assign)
        self.topic = topic
        self.records: list[tuple[int, int]] = []
        """(partition, offset) of every record received, in order."""
        self.assignments = 0
        """How many times the group gave this member partitions (once per rebalance)."""
        self.errors: list[KafkaError] = []

    def _on_assign(self, _consumer: Consumer, _partitions: list[TopicPartition]) -> None:
        self.assignments += 1

    def poll(self, timeout_s: float = 0.05) -> None:
        message = self.consumer.poll(timeout_s)
        if message is None:
            return
        if message.error() is None:
            self.records.append((message.partition(), message.offset()))
        else:
            self.errors.append(message.error())

    def assigned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def commit(self) -> None:
        self.consumer.commit(asynchronous=False)

    def committed(self, partitions: Iterable[int]) -> dict[int, int]:
        wanted = [TopicPartition(self.topic, p) for p in partitions]
        return {tp.partition: tp.offset for tp in self.consumer.committed(wanted, timeout=10)}

    def close(self) -> None:
        self.consumer.close()


def poll_until(members: Iterable[RdkafkaMember], condition: Callable[[], bool], what: str) -> None:
    """Poll every member in turn until `condition` holds (librdkafka acts only when polled)."""
    members = list(members)
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            state = [(sorted(m.assigned()), len(m.records)) for m in members]
            raise AssertionError(f"{what}: not reached in {WAIT_S} s; (assigned, records): {state}")
        for member in members:
            member.poll()


class VerifiableConsumer:
    """org.apache.kafka.tools.VerifiableConsumer in its own JVM: it subscribes, commits after
    every poll, and prints each event (assignment, records, commits) as a JSON line."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        log_dir: Path,
        *,
        instance: str | None = None,
        assignor: str = "org.apache.kafka.clients.consumer.RangeAssignor",
    ) -> None:
        java = shutil.which("java")
        assert java is not None, "java is not on PATH"
        command = [
            java, "-Xmx192m", "-XX:TieredStopAtLevel=1", "-cp", f"{kafka_lib()}/*",
            f"-Dlog4j.configuration=file:{quiet_log4j(log_dir)}",
            "org.apache.kafka.tools.VerifiableConsumer",
            "--bootstrap-server", bootstrap, "--topic", topic, "--group-id", group,
            "--session-timeout", "10000", "--reset-policy", "earliest",
            "--assignment-strategy", assignor,
            *(["--group-instance-id", instance] if instance else []),
        ]  # fmt: skip
        self._stderr = (log_dir / f"verifiable-consumer-{group}-{time.monotonic_ns()}.log").open(
            "wb"
        )
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self._stderr)
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                self.events.append(event)

    def named(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e.get("name") == name]

    def assigned(self) -> set[int]:
        """Partitions held now: assignments minus revocations, in event order."""
        held: set[int] = set()
        with self._lock:
            for event in self.events:
                partitions = {p["partition"] for p in event.get("partitions", ())}
                if event.get("name") == "partitions_assigned":
                    held |= partitions
                elif event.get("name") == "partitions_revoked":
                    held -= partitions
        return held

    def consumed(self) -> dict[int, set[int]]:
        """Offsets received per partition, from the records_consumed summaries."""
        offsets: dict[int, set[int]] = {}
        for event in self.named("records_consumed"):
            for part in event["partitions"]:
                span = range(part["minOffset"], part["maxOffset"] + 1)
                offsets.setdefault(part["partition"], set()).update(span)
        return offsets

    def committed(self) -> dict[int, int]:
        """The last successfully committed offset per partition."""
        latest: dict[int, int] = {}
        for event in self.named("offsets_committed"):
            if event.get("success"):
                for part in event["offsets"]:
                    latest[part["partition"]] = part["offset"]
        return latest

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM: the tool closes its consumer (LeaveGroup) and prints shutdown_complete."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout_s)
        self._reader.join(timeout_s)
        self._stderr.close()


def quiet_log4j(log_dir: Path) -> Path:
    """log4j to stderr at WARN: stdout carries only the tool's JSON events."""
    path = log_dir / "java-client-log4j.properties"
    path.write_text(
        "log4j.rootLogger=WARN, stderr\n"
        "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.stderr.Target=System.err\n"
        "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.stderr.layout.ConversionPattern=%d %p %c: %m%n\n"
    )
    return path


Records = list[tuple[int, int]]
"""(partition, offset) of each record a consumer read."""


def _partition_offsets(lines: str) -> Records:
    return [(int(p), int(o)) for p, o in (line.split(":") for line in lines.split())]


def rdkafka_regex_topics(bootstrap: str, group: str, pattern: str) -> set[str]:
    """The topics of the first assignment of a librdkafka consumer subscribed to `pattern` (a
    regex subscription: it starts with ^); it reads nothing (auto.offset.reset latest)."""
    member = RdkafkaMember(bootstrap, group, pattern, **{"auto.offset.reset": "latest"})
    try:
        poll_until([member], lambda: member.assignments > 0, f"an assignment for {pattern}")
        return {tp.topic for tp in member.consumer.assignment()}
    finally:
        member.close()


def kcat_consume(bootstrap: str, group: str, topic: str, count: int) -> Records:
    """`kcat -G`: a balanced (subscribe()) librdkafka consumer reading `count` records, which
    commits what it read when it exits. Not `-o beginning`: kcat would then assign every
    partition at that offset, overriding the committed ones."""
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed (make setup installs it)"
    command = [
        kcat, "-b", bootstrap, "-G", group, "-c", str(count), "-q", "-f", "%p:%o\n",
        "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000", topic,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=WAIT_S, check=True)
    return _partition_offsets(done.stdout)


FRANZGO_1_21 = "go121.mod"
"""franz-go 1.21.0 (issue 19: it took a topic without a topic id for an unknown one)."""


def build_franzgo(out_dir: Path, modfile: str = "go.mod") -> Path:
    """Build franzgo/main.go against the franz-go of `modfile` (modules from the Go module
    proxy, cached by `make setup`)."""
    go = shutil.which("go")
    assert go is not None, "go is not installed: the franz-go consumer needs it"
    binary = out_dir / f"franzgo-consumer-{Path(modfile).stem}"
    subprocess.run(
        [go, "build", f"-modfile={modfile}", "-o", str(binary), "."],
        cwd=FRANZGO_SOURCE,
        check=True,
        timeout=BUILD_TIMEOUT_S,
        capture_output=True,
    )
    return binary


def franzgo_consume(binary: Path, bootstrap: str, group: str, topic: str, count: int) -> Records:
    command = [
        str(binary), "-brokers", bootstrap, "-group", group, "-topic", topic,
        "-count", str(count), "-timeout", f"{int(WAIT_S)}s",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=WAIT_S + 10, check=False)
    assert done.returncode == 0, done.stderr
    return _partition_offsets(done.stdout)


def franzgo_regex_topics(binary: Path, bootstrap: str, group: str, pattern: str) -> set[str]:
    """The topics of the first assignment of the franz-go consumer consuming `pattern` as a
    regular expression (franz-go's regex consumption skips the topics flagged internal)."""
    command = [
        str(binary), "-brokers", bootstrap, "-group", group, "-topic", pattern, "-regex",
        "-timeout", f"{int(WAIT_S)}s",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=WAIT_S + 10, check=False)
    assert done.returncode == 0, done.stderr
    return {line.removeprefix("assigned ") for line in done.stdout.splitlines()}


async def aiokafka_split_then_commit(
    bootstrap: str, group: str, topic: str, produce: Callable[[], None], count: int
) -> tuple[Records, Records, set[int], set[int]]:
    """Two aiokafka members: wait until both hold partitions, `produce`, read `count` records
    between them, commit, stop. Returns both members' records and final assignments."""

    def member() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )

    a, b = member(), member()
    records: tuple[Records, Records] = ([], [])
    await a.start()
    await b.start()
    try:

        async def poll_until(condition: Callable[[], bool], what: str) -> None:
            deadline = time.monotonic() + WAIT_S
            while not condition():
                if time.monotonic() > deadline:
                    raise AssertionError(f"{what}: not reached within {WAIT_S} s")
                batches = await asyncio.gather(a.getmany(timeout_ms=100), b.getmany(timeout_ms=100))
                for mine, batch in zip(records, batches, strict=True):
                    mine.extend((m.partition, m.offset) for ms in batch.values() for m in ms)

        def assigned(consumer: AIOKafkaConsumer) -> set[int]:
            return {tp.partition for tp in consumer.assignment()}

        await poll_until(lambda: bool(assigned(a)) and bool(assigned(b)), "both members assigned")
        await asyncio.to_thread(produce)
        await poll_until(lambda: len(records[0]) + len(records[1]) >= count, "records read")
        await a.commit()
        await b.commit()
        return records[0], records[1], assigned(a), assigned(b)
    finally:
        await a.stop()
        await b.stop()
