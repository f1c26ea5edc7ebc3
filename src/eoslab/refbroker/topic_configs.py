"""A topic's configs (CreateTopics' `configs`): checked as Kafka 3.9 checks them, kept with the
topic, and the one the broker acts on applied.

Kafka keeps a topic's configs apart from the broker's (ZooKeeper's /config/topics/<topic>); a
topic config overrides the broker's default for that topic only. The reference broker acts on
one of them: `max.message.bytes`, the largest record batch a Produce may append to the topic,
whose default is the broker's `message.max.bytes` (`--message-max-bytes`, 1048588 as in Kafka).
Every other topic config Kafka 3.9 knows is accepted and kept but not acted on (retention,
compaction, segment sizes, ...), and its value is not checked.

Checked as Kafka 3.9's CreateTopics checks them (ZkAdminManager, LogConfig.validate; the messages
are Kafka's, as the lab's Kafka 3.9 answers them), each an INVALID_CONFIG: a null value, a name
that is no topic config, a `max.message.bytes` that is not a Java int or is negative. A name
given twice keeps its last value, as Kafka's Properties do.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

MAX_MESSAGE_BYTES = "max.message.bytes"
DEFAULT_MESSAGE_MAX_BYTES = 1_048_588
"""message.max.bytes, Kafka's default: the largest batch of a topic without max.message.bytes."""
TOPIC_CONFIG_NAMES = frozenset(
    {
        "cleanup.policy",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.type",
        "compression.zstd.level",
        "delete.retention.ms",
        "file.delete.delay.ms",
        "flush.messages",
        "flush.ms",
        "follower.replication.throttled.replicas",
        "index.interval.bytes",
        "leader.replication.throttled.replicas",
        "local.retention.bytes",
        "local.retention.ms",
        "max.compaction.lag.ms",
        MAX_MESSAGE_BYTES,
        "message.downconversion.enable",
        "message.format.version",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms",
        "message.timestamp.type",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "min.insync.replicas",
        "preallocate",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "remote.storage.enable",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.index.bytes",
        "segment.jitter.ms",
        "segment.ms",
        "unclean.leader.election.enable",
    }
)
"""Kafka 3.9's topic configs: the 36 names its DescribeConfigs lists for a topic."""
JAVA_INT = re.compile(r"[+-]?[0-9]+")
JAVA_TRIMMED = "".join(chr(c) for c in range(0x21))
"""What Java's String.trim() strips: every character up to and including the space."""
INT_RANGE = range(-(2**31), 2**31)


class InvalidConfigError(ValueError):
    """Kafka's InvalidConfigurationException: INVALID_CONFIG, with its message."""


def null_valued(configs: Iterable[tuple[str, str | None]]) -> str | None:
    """Kafka's refusal of null values (checked before anything else of the topic), or None."""
    nulls = [name for name, value in configs if value is None]
    return None if not nulls else f"Null value not supported for topic configs: {','.join(nulls)}"


def checked_configs(configs: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    """The topic's configs as given (without null values), the last of a name winning; raises
    InvalidConfigError for an unknown name or a `max.message.bytes` Kafka would refuse."""
    kept = {name: value for name, value in configs if value is not None}
    for name in kept:
        if name not in TOPIC_CONFIG_NAMES:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
    if MAX_MESSAGE_BYTES in kept:
        max_message_bytes(kept, DEFAULT_MESSAGE_MAX_BYTES)
    return kept


def max_message_bytes(configs: Mapping[str, str], default: int) -> int:
    """The topic's largest batch: its `max.message.bytes`, else the broker's `default`; raises
    InvalidConfigError for a value Kafka's ConfigDef refuses (an INT, at least 0)."""
    value = configs.get(MAX_MESSAGE_BYTES)
    if value is None:
        return default
    trimmed = value.strip(JAVA_TRIMMED)
    if not JAVA_INT.fullmatch(trimmed) or int(trimmed) not in INT_RANGE:
        raise InvalidConfigError(
            f"Invalid value {value} for configuration {MAX_MESSAGE_BYTES}: Not a number of type INT"
        )
    if int(trimmed) < 0:
        raise InvalidConfigError(
            f"Invalid value {int(trimmed)} for configuration {MAX_MESSAGE_BYTES}: "
            "Value must be at least 0"
        )
    return int(trimmed)
