"""The group membership a librdkafka consumer holds: member id and generation id.

confluent-kafka has no getter for the generation. ``Consumer.consumer_group_metadata()``
(the object a transactional producer sends with its offsets) asks the consumer group
handler for its current ``rkcg_member_id`` and ``rkcg_generation_id`` — the very values
librdkafka puts into its next OffsetCommit — and returns them serialized by
``rd_kafka_consumer_group_metadata_write`` (librdkafka ``src/rdkafka_cgrp.c``)::

    "CGMDv2:" <generation_id: int32, host byte order> <group_id> NUL <member_id> NUL
    <group_instance_id_is_null: int8> [<group_instance_id> NUL]

The statistics' ``cgrp`` object has the join state but no generation, and the rebalance
callbacks get partitions only, so this is the one place the generation is exposed. A driver's
client (Java, franz-go) answers the same call with its own snapshot of the membership
(:class:`eoslab.workload.drivers.remote.GroupMetadata`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from eoslab.workload.drivers.api import ConsumerApi
from eoslab.workload.drivers.remote import GroupMetadata

MAGIC = b"CGMDv2:"
_GENERATION = struct.Struct("=i")


@dataclass(frozen=True, slots=True)
class Membership:
    member_id: str
    generation: int


NO_MEMBERSHIP = Membership("", -1)
"""Before the first JoinGroup answer, after leaving, or after the coordinator dropped us."""


class GroupMetadataError(ValueError):
    """Bytes that are not librdkafka's serialized consumer group metadata (v2)."""


def parse(blob: bytes) -> Membership:
    if not blob.startswith(MAGIC) or len(blob) < len(MAGIC) + _GENERATION.size + 3:
        raise GroupMetadataError(f"not CGMDv2 consumer group metadata: {blob[:16]!r}")
    (generation,) = _GENERATION.unpack_from(blob, len(MAGIC))
    strings = blob[len(MAGIC) + _GENERATION.size :].split(b"\0")
    if len(strings) < 3:
        raise GroupMetadataError("consumer group metadata without a member id")
    return Membership(member_id=strings[1].decode(), generation=generation)


def membership(consumer: ConsumerApi) -> Membership:
    """The consumer's membership now (NO_MEMBERSHIP when the client has none to give)."""
    try:
        metadata = consumer.consumer_group_metadata()
    except RuntimeError:
        return NO_MEMBERSHIP
    if isinstance(metadata, GroupMetadata):
        if metadata.generation < 0:
            return NO_MEMBERSHIP
        return Membership(member_id=metadata.member_id, generation=metadata.generation)
    return parse(metadata)
