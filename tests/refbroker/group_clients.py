"""Real group consumers for the tests, each driven with a deadline: librdkafka (confluent-kafka)
and Kafka's own Java VerifiableConsumer (kafka-tools 3.9, its JSON event lines parsed).

librdkafka waits silently forever when the broker lacks something, so nothing here blocks
without a bound: every wait polls until its condition holds or its deadline passes, and then
fails with what it saw.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from eoslab.paths import kafka_lib

WAIT_S = 60.0
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
        self.consumer.subscribe([topic])
        self.topic = topic
        self.records: list[tuple[int, int]] = []
        """(partition, offset) of every record received, in order."""

    def poll(self, timeout_s: float = 0.05) -> None:
        message = self.consumer.poll(timeout_s)
        if message is not None and message.error() is None:
            self.records.append((message.partition(), message.offset()))

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
            f"-Dlog4j.configuration=file:{_quiet_log4j(log_dir)}",
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


def _quiet_log4j(log_dir: Path) -> Path:
    """log4j to stderr at WARN: stdout carries only the tool's JSON events."""
    path = log_dir / "verifiable-consumer-log4j.properties"
    path.write_text(
        "log4j.rootLogger=WARN, stderr\n"
        "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.stderr.Target=System.err\n"
        "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.stderr.layout.ConversionPattern=%d %p %c: %m%n\n"
    )
    return path
