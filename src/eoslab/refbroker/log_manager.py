"""All partitions of the reference broker under one data directory (Kafka's LogManager).

Each topic has a topic id (KIP-516), a random UUID given at creation and kept in every partition
directory's `partition.metadata` (Kafka's file of that name), so Metadata answers it as Kafka
3.9 does; a partition directory without one (made before topic ids) gets its topic's id, or a
new one, when it is opened.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from eoslab.refbroker.durable_files import write_atomically
from eoslab.refbroker.partition_log import (
    AppendResult,
    OffsetOutOfRangeError,
    PartitionLog,
    ProducerView,
)
from eoslab.refbroker.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    DEFAULT_RETAINED_BATCHES,
    ProducerStateManager,
    Rules,
    check_retained_batches,
)

__all__ = [
    "AppendResult",
    "InvalidTopicError",
    "LogManager",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "ProducerView",
    "Rules",
    "StorageConfig",
    "TopicExistsError",
    "UnknownTopicOrPartitionError",
]

PARTITION_METADATA = "partition.metadata"
TOPIC_ID_LINE = re.compile(r"^topic_id: (?P<id>[0-9a-f-]{36})$", re.MULTILINE)
LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")
PARTITION_DIR = re.compile(r"(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)")


@dataclass(frozen=True)
class StorageConfig:
    data_dir: Path
    fsync: Literal["every-batch", "os"] = "every-batch"
    rules: Rules = Rules.KAFKA_3_9
    retained_batches: int = DEFAULT_RETAINED_BATCHES
    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    segment_bytes: int = 64 * 1024 * 1024
    max_batch_bytes: int = 1_048_588  # message.max.bytes


class TopicExistsError(Exception):
    pass


class UnknownTopicOrPartitionError(Exception):
    pass


class InvalidTopicError(ValueError):
    """An illegal topic name or partition count."""


class LogManager:
    def __init__(self, config: StorageConfig) -> None:
        """Open and recover every partition found under `config.data_dir`."""
        self.config = config
        self._rules = config.rules
        self._retained_batches = config.retained_batches
        config.data_dir.mkdir(parents=True, exist_ok=True)
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._creating: set[str] = set()
        for directory in sorted(config.data_dir.iterdir()):
            match = PARTITION_DIR.fullmatch(directory.name)
            if directory.is_dir() and match:
                self._open(match["topic"], int(match["partition"]))
        for (topic, _), log in sorted(self._logs.items()):
            stored = _read_topic_id(log.directory)
            if stored is not None:
                self._topic_ids.setdefault(topic, stored)
        for (topic, _), log in self._logs.items():
            topic_id = self._topic_ids.setdefault(topic, uuid.uuid4())
            if _read_topic_id(log.directory) != topic_id:
                _write_topic_id(log.directory, topic_id)

    @property
    def rules(self) -> Rules:
        return self._rules

    @rules.setter
    def rules(self, rules: Rules) -> None:
        self._rules = Rules(rules)
        for log in self._logs.values():
            log.producers.rules = self._rules

    def _open(self, topic: str, partition: int) -> PartitionLog:
        log = self._new_log(topic, partition)
        self._logs[topic, partition] = log
        return log

    def _new_log(self, topic: str, partition: int) -> PartitionLog:
        """A partition opened (created if new, recovered otherwise) but not yet registered."""
        producers = ProducerStateManager(
            self._rules, self._retained_batches, self.config.producer_id_expiration_ms
        )
        log = PartitionLog(
            self.config.data_dir / f"{topic}-{partition}",
            topic,
            partition,
            producers,
            sync_every_batch=self.config.fsync == "every-batch",
            segment_bytes=self.config.segment_bytes,
            max_batch_bytes=self.config.max_batch_bytes,
        )
        return log

    def create_topic(self, name: str, partitions: int) -> None:
        for _ in self.create_topic_steps(name, partitions):
            pass

    def create_topic_steps(self, name: str, partitions: int) -> Iterator[int]:
        """Create a topic one partition at a time, yielding after each (each costs a few
        fsyncs: thousands would stall the broker's loop for seconds). The name is reserved from
        the first step (a second creation gets TopicExistsError); the topic is published, all
        partitions at once, after the last."""
        if not LEGAL_TOPIC.fullmatch(name) or name in {".", ".."}:
            raise InvalidTopicError(f"illegal topic name {name!r}")
        if partitions < 1:
            raise InvalidTopicError(f"a topic needs at least one partition, got {partitions}")
        if name in self.topics() or name in self._creating:
            raise TopicExistsError(name)
        self._creating.add(name)
        try:
            topic_id = uuid.uuid4()
            created = {}
            for partition in range(partitions):
                log = self._new_log(name, partition)
                _write_topic_id(log.directory, topic_id)
                created[name, partition] = log
                yield partition
            self._topic_ids[name] = topic_id
            self._logs.update(created)
        finally:
            self._creating.discard(name)

    def delete_topic(self, name: str) -> None:
        for _ in self.delete_topic_steps(name):
            pass

    def delete_topic_steps(self, name: str) -> Iterator[int]:
        """Delete a topic: gone from every lookup at once, then its partitions' files one
        partition at a time, yielding after each."""
        doomed = [key for key in self._logs if key[0] == name]
        if not doomed:
            raise UnknownTopicOrPartitionError(name)
        logs = [self._logs.pop(key) for key in doomed]
        del self._topic_ids[name]
        for log in logs:
            log.delete()
            yield log.partition

    def topics(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for topic, _ in self._logs:
            counts[topic] = counts.get(topic, 0) + 1
        return counts

    def topic_id(self, topic: str) -> uuid.UUID:
        try:
            return self._topic_ids[topic]
        except KeyError:
            raise UnknownTopicOrPartitionError(topic) from None

    def partition(self, topic: str, partition: int) -> PartitionLog:
        try:
            return self._logs[topic, partition]
        except KeyError:
            raise UnknownTopicOrPartitionError(f"{topic}-{partition}") from None

    def expire_producers(
        self, now_ms: int, producer_id: int | None = None, force: bool = False
    ) -> int:
        """Idle expiry (or, with `force`, removal) of producer state; returns entries removed."""
        return sum(
            log.producers.remove_expired(now_ms, producer_id, force) for log in self._logs.values()
        )

    @property
    def retained_batches(self) -> int:
        return self._retained_batches

    def set_retained_batches(self, n: int) -> None:
        check_retained_batches(n)
        for log in self._logs.values():
            log.producers.set_retained_batches(n)
        self._retained_batches = n

    def close(self) -> None:
        for log in self._logs.values():
            log.close()
        self._logs.clear()


def _read_topic_id(directory: Path) -> uuid.UUID | None:
    try:
        found = TOPIC_ID_LINE.search((directory / PARTITION_METADATA).read_text())
    except (OSError, UnicodeDecodeError):
        return None
    return None if found is None else uuid.UUID(found["id"])


def _write_topic_id(directory: Path, topic_id: uuid.UUID) -> None:
    write_atomically(directory / PARTITION_METADATA, f"version: 0\ntopic_id: {topic_id}\n".encode())
