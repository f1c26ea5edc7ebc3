"""Kafka's internal topics, which the reference broker does not have but must name: a
transaction that commits consumer offsets holds the __consumer_offsets partition of its group
(AddOffsetsToTxn), and DescribeTransactions shows it, as on Kafka."""

from __future__ import annotations

GROUP_METADATA_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_PARTITIONS = 50
"""offsets.topic.num.partitions, Kafka's default."""


def java_string_hash(text: str) -> int:
    """String.hashCode of the UTF-16 text, as a signed 32-bit int."""
    value = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        value = (31 * value + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def offsets_partition_for(group_id: str) -> int:
    """GroupMetadataManager.partitionFor: Utils.abs(groupId.hashCode) % partitions (Utils.abs
    maps Integer.MIN_VALUE to 0)."""
    hashed = java_string_hash(group_id)
    return (0 if hashed == -(1 << 31) else abs(hashed)) % OFFSETS_TOPIC_PARTITIONS


def offsets_topic_partition(group_id: str) -> tuple[str, int]:
    return GROUP_METADATA_TOPIC, offsets_partition_for(group_id)
