"""Kafka's internal topics on the reference broker.

Kafka creates `__consumer_offsets` on the first FindCoordinator for a group and
`__transaction_state` on the first FindCoordinator for a transactional id (an idempotent
producer's InitProducerId creates neither), each with its own partition count; Metadata then
lists them with `is_internal` true (a name-based flag: Kafka's Topic.isInternal, also set on the
error answer for one that does not exist yet), and clients skip them by that flag (franz-go's
regex consumption; the Java consumer's `exclude.internal.topics`, as documented; librdkafka's
regex subscription does not skip them). Clients may not write them: Produce and DeleteRecords
answer INVALID_TOPIC_EXCEPTION, AddPartitionsToTxn TOPIC_AUTHORIZATION_FAILED. CreateTopics
makes one that does not exist yet with the partitions it asks for, and DeleteTopics deletes one
(all checked on the lab's Kafka 3.9).

Here they are topics of the LogManager without a log (log_manager.py): made by the same
CreateTopics path, durable, listed, and every partition readable (Fetch, ListOffsets,
DescribeProducers) as an empty log. They stay empty: the group coordinator keeps its offsets and
groups in `groups/`, the transaction coordinator its state in `transactions/`, so deleting one
loses none of them (Kafka loses its groups' offsets with `__consumer_offsets`). A transaction
that commits consumer offsets still names the group's `__consumer_offsets` partition
(AddOffsetsToTxn), and DescribeTransactions shows it.
"""

from __future__ import annotations

GROUP_METADATA_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_PARTITIONS = 50
"""offsets.topic.num.partitions, Kafka's default."""
TRANSACTION_STATE_TOPIC = "__transaction_state"
TRANSACTION_STATE_PARTITIONS = 50
"""transaction.state.log.num.partitions, Kafka's default."""
INTERNAL_TOPIC_PARTITIONS = {
    GROUP_METADATA_TOPIC: OFFSETS_TOPIC_PARTITIONS,
    TRANSACTION_STATE_TOPIC: TRANSACTION_STATE_PARTITIONS,
}
"""The internal topics the coordinators make, and the partitions each is made with."""
INTERNAL_TOPICS = frozenset({*INTERNAL_TOPIC_PARTITIONS, "__share_group_state"})
"""Kafka 3.9's Topic.INTERNAL_TOPICS (KIP-932's share group state, never made here: share groups
are not served)."""


def is_internal(topic: str | None) -> bool:
    """Kafka's Topic.isInternal: by name, whether or not the topic exists."""
    return topic in INTERNAL_TOPICS


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
