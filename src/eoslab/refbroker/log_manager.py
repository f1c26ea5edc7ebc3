"""All partitions of the reference broker under one data directory (Kafka's LogManager)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

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
        for directory in sorted(config.data_dir.iterdir()):
            match = PARTITION_DIR.fullmatch(directory.name)
            if directory.is_dir() and match:
                self._open(match["topic"], int(match["partition"]))

    @property
    def rules(self) -> Rules:
        return self._rules

    @rules.setter
    def rules(self, rules: Rules) -> None:
        self._rules = Rules(rules)
        for log in self._logs.values():
            log.producers.rules = self._rules

    def _open(self, topic: str, partition: int) -> PartitionLog:
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
        self._logs[topic, partition] = log
        return log

    def create_topic(self, name: str, partitions: int) -> None:
        if not LEGAL_TOPIC.fullmatch(name) or name in {".", ".."}:
            raise InvalidTopicError(f"illegal topic name {name!r}")
        if partitions < 1:
            raise InvalidTopicError(f"a topic needs at least one partition, got {partitions}")
        if name in self.topics():
            raise TopicExistsError(name)
        for partition in range(partitions):
            self._open(name, partition)

    def delete_topic(self, name: str) -> None:
        doomed = [key for key in self._logs if key[0] == name]
        if not doomed:
            raise UnknownTopicOrPartitionError(name)
        for key in doomed:
            self._logs.pop(key).delete()

    def topics(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for topic, _ in self._logs:
            counts[topic] = counts.get(topic, 0) + 1
        return counts

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
