"""All partitions of the reference broker under one data directory (Kafka's LogManager).

Each topic has a topic id (KIP-516), a random UUID given at creation and kept in every partition
directory's `partition.metadata` (Kafka's file of that name), so Metadata answers it as Kafka
3.9 does; a partition directory without one (made before topic ids) gets its topic's id, or a
new one, when it is opened. A topic created with configs (topic_configs.py) keeps them the same
way, in every partition directory's `topic-config.json` (the JSON of Kafka's ZooKeeper node
/config/topics/<topic>), written before the topic appears; its `max.message.bytes` bounds the
batches each of its partitions accepts.

Kafka's internal topics (internal_topics.py) have no log of their own: which exist, with their
topic ids and partition counts, is kept in `internal-topics.json`, and every partition of them
reads as the same empty log (`internal-topics.empty`, made when first read), which nothing
writes: the handlers refuse clients' writes to internal topics, and transaction markers never
go there. Fifty real partitions would cost some 450 fsyncs to make and a few hundred more at
every start and stop (seconds on a busy machine, measured), for logs that stay empty.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from eoslab.refbroker.durable_files import write_atomically
from eoslab.refbroker.internal_topics import is_internal
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
from eoslab.refbroker.topic_configs import (
    DEFAULT_MESSAGE_MAX_BYTES,
    checked_configs,
    max_message_bytes,
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

log = logging.getLogger(__name__)

PARTITION_METADATA = "partition.metadata"
TOPIC_CONFIG = "topic-config.json"
INTERNAL_TOPICS = "internal-topics.json"
EMPTY_LOG = "internal-topics.empty"
"""The empty log every partition of an internal topic reads as (no partition directory's name:
those end in -<partition>)."""
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
    max_batch_bytes: int = DEFAULT_MESSAGE_MAX_BYTES
    """message.max.bytes: the largest batch of a topic without max.message.bytes."""


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
        self._topic_configs: dict[str, dict[str, str]] = {}
        self._internal: dict[str, int] = {}
        """The internal topics made, by name: their partitions (they have no log)."""
        self._empty: PartitionLog | None = None
        self._creating: set[str] = set()
        found = [
            (match["topic"], int(match["partition"]), directory)
            for directory in sorted(config.data_dir.iterdir())
            if directory.is_dir() and (match := PARTITION_DIR.fullmatch(directory.name))
        ]
        for topic, _, directory in found:
            if topic not in self._topic_configs and (stored := _read_configs(directory)):
                self._topic_configs[topic] = stored
        for topic, partition, _ in found:
            self._open(topic, partition)
        for (topic, _), plog in sorted(self._logs.items()):
            stored_id = _read_topic_id(plog.directory)
            if stored_id is not None:
                self._topic_ids.setdefault(topic, stored_id)
        for (topic, _), plog in self._logs.items():
            topic_id = self._topic_ids.setdefault(topic, uuid.uuid4())
            if _read_topic_id(plog.directory) != topic_id:
                _write_topic_id(plog.directory, topic_id)
            configs = self._topic_configs.get(topic, {})
            if configs and _read_configs(plog.directory) != configs:
                _write_configs(plog.directory, configs)  # a creation cut short by a crash
        for name, (topic_id, partitions) in _read_internal(config.data_dir).items():
            if name not in self._topic_ids:  # a topic with a log of that name (made before) wins
                self._topic_ids[name], self._internal[name] = topic_id, partitions

    @property
    def rules(self) -> Rules:
        return self._rules

    @rules.setter
    def rules(self, rules: Rules) -> None:
        self._rules = Rules(rules)
        for log in self._logs.values():
            log.producers.rules = self._rules

    def _open(self, topic: str, partition: int) -> PartitionLog:
        plog = self._new_log(topic, partition, self._topic_configs.get(topic, {}))
        self._logs[topic, partition] = plog
        return plog

    def _new_log(self, topic: str, partition: int, configs: Mapping[str, str]) -> PartitionLog:
        """A partition opened (created if new, recovered otherwise) but not yet registered."""
        producers = ProducerStateManager(
            self._rules, self._retained_batches, self.config.producer_id_expiration_ms
        )
        return PartitionLog(
            self.config.data_dir / f"{topic}-{partition}",
            topic,
            partition,
            producers,
            sync_every_batch=self.config.fsync == "every-batch",
            segment_bytes=self.config.segment_bytes,
            max_batch_bytes=max_message_bytes(configs, self.config.max_batch_bytes),
        )

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> None:
        for _ in self.create_topic_steps(name, partitions, configs):
            pass

    def create_topic_steps(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> Iterator[int]:
        """Create a topic one partition at a time, yielding after each (each costs a few
        fsyncs: thousands would stall the broker's loop for seconds). The name is reserved from
        the first step (a second creation gets TopicExistsError); the topic is published, all
        partitions at once, after the last. `configs` are topic configs, checked
        (InvalidConfigError) before anything is made. An internal topic is made in one step,
        without a log (its configs are dropped: nothing is written to it)."""
        if not LEGAL_TOPIC.fullmatch(name) or name in {".", ".."}:
            raise InvalidTopicError(f"illegal topic name {name!r}")
        if partitions < 1:
            raise InvalidTopicError(f"a topic needs at least one partition, got {partitions}")
        kept = checked_configs((configs or {}).items())
        if name in self.topics() or name in self._creating:
            raise TopicExistsError(name)
        if is_internal(name):
            topic_id = uuid.uuid4()
            _write_internal(
                self.config.data_dir, {**self._internal_topics(), name: (topic_id, partitions)}
            )
            self._topic_ids[name], self._internal[name] = topic_id, partitions
            return
        self._creating.add(name)
        try:
            topic_id = uuid.uuid4()
            created = {}
            for partition in range(partitions):
                plog = self._new_log(name, partition, kept)
                if kept:
                    _write_configs(plog.directory, kept)
                _write_topic_id(plog.directory, topic_id)
                created[name, partition] = plog
                yield partition
            self._topic_ids[name] = topic_id
            if kept:
                self._topic_configs[name] = kept
            self._logs.update(created)
        finally:
            self._creating.discard(name)

    def delete_topic(self, name: str) -> None:
        for _ in self.delete_topic_steps(name):
            pass

    def delete_topic_steps(self, name: str) -> Iterator[int]:
        """Delete a topic: gone from every lookup at once, then its partitions' files one
        partition at a time, yielding after each."""
        if name in self._internal:
            left = {topic: v for topic, v in self._internal_topics().items() if topic != name}
            _write_internal(self.config.data_dir, left)
            del self._internal[name], self._topic_ids[name]
            return
        doomed = [key for key in self._logs if key[0] == name]
        if not doomed:
            raise UnknownTopicOrPartitionError(name)
        logs = [self._logs.pop(key) for key in doomed]
        del self._topic_ids[name]
        self._topic_configs.pop(name, None)
        for log in logs:
            log.delete()
            yield log.partition

    def topics(self) -> dict[str, int]:
        counts = dict(self._internal)
        for topic, _ in self._logs:
            counts[topic] = counts.get(topic, 0) + 1
        return counts

    def topic_id(self, topic: str) -> uuid.UUID:
        try:
            return self._topic_ids[topic]
        except KeyError:
            raise UnknownTopicOrPartitionError(topic) from None

    def partition(self, topic: str, partition: int) -> PartitionLog:
        if 0 <= partition < self._internal.get(topic, 0):
            return self._empty_log()
        try:
            return self._logs[topic, partition]
        except KeyError:
            raise UnknownTopicOrPartitionError(f"{topic}-{partition}") from None

    def _empty_log(self) -> PartitionLog:
        if self._empty is None:
            self._empty = PartitionLog(
                self.config.data_dir / EMPTY_LOG,
                EMPTY_LOG,
                0,
                ProducerStateManager(self._rules, self._retained_batches),
                sync_every_batch=self.config.fsync == "every-batch",
                segment_bytes=self.config.segment_bytes,
                max_batch_bytes=0,  # and no batch would fit, were one appended by mistake
            )
        return self._empty

    def _internal_topics(self) -> dict[str, tuple[uuid.UUID, int]]:
        return {name: (self._topic_ids[name], n) for name, n in self._internal.items()}

    def expire_producers(
        self, now_ms: int, producer_id: int | None = None, force: bool = False
    ) -> int:
        """Idle expiry (or, with `force`, removal) of producer state; returns entries removed."""
        return sum(
            log.producers.remove_expired(now_ms, producer_id, force) for log in self._logs.values()
        )

    def held(self) -> dict[str, int]:
        """What the storage holds: partitions, records (log start to end, markers included)
        and producer state entries; after a crash-restart, what was recovered from disk."""
        logs = self._logs.values()
        return {
            "partitions": len(self._logs),
            "records": sum(log.log_end_offset - log.log_start_offset for log in logs),
            "producers": sum(len(log.producers.active_producers()) for log in logs),
        }

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
        if self._empty is not None:
            self._empty.close()


def _read_topic_id(directory: Path) -> uuid.UUID | None:
    try:
        found = TOPIC_ID_LINE.search((directory / PARTITION_METADATA).read_text())
    except (OSError, UnicodeDecodeError):
        return None
    return None if found is None else uuid.UUID(found["id"])


def _write_topic_id(directory: Path, topic_id: uuid.UUID) -> None:
    write_atomically(directory / PARTITION_METADATA, f"version: 0\ntopic_id: {topic_id}\n".encode())


def _read_configs(directory: Path) -> dict[str, str] | None:
    """The topic configs kept in a partition directory; None when it keeps none, or none that
    can be used (then the broker's defaults apply, and the log says why)."""
    path = directory / TOPIC_CONFIG
    try:
        stored = json.loads(path.read_bytes())["config"]
        return checked_configs(stored.items())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as unusable:
        log.warning("ignoring %s: %s", path, unusable)
        return None


def _write_configs(directory: Path, configs: Mapping[str, str]) -> None:
    document = {"version": 1, "config": dict(configs)}
    write_atomically(directory / TOPIC_CONFIG, json.dumps(document, sort_keys=True).encode())


def _read_internal(data_dir: Path) -> dict[str, tuple[uuid.UUID, int]]:
    """The internal topics made: (topic id, partitions) by name; none when the file is missing
    or unusable (the log says why: the next FindCoordinator makes them again)."""
    path = data_dir / INTERNAL_TOPICS
    try:
        stored = json.loads(path.read_bytes())["topics"]
        return {
            name: (uuid.UUID(entry["topic_id"]), int(entry["partitions"]))
            for name, entry in stored.items()
            if is_internal(name)
        }
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as unusable:
        log.warning("ignoring %s: %s", path, unusable)
        return {}


def _write_internal(data_dir: Path, topics: Mapping[str, tuple[uuid.UUID, int]]) -> None:
    document = {
        "version": 1,
        "topics": {
            name: {"topic_id": str(topic_id), "partitions": partitions}
            for name, (topic_id, partitions) in sorted(topics.items())
        },
    }
    write_atomically(data_dir / INTERNAL_TOPICS, json.dumps(document).encode())
