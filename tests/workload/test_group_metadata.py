"""The generation and member id read from librdkafka's serialized consumer group metadata."""

from __future__ import annotations

import struct

import pytest
from confluent_kafka import Consumer

from eoslab.workload.consumer.group_metadata import (
    NO_MEMBERSHIP,
    GroupMetadataError,
    Membership,
    membership,
    parse,
)


def cgmd(generation: int, group: bytes, member: bytes, instance: bytes | None = None) -> bytes:
    """rd_kafka_consumer_group_metadata_write's layout (librdkafka src/rdkafka_cgrp.c)."""
    tail = b"\x01" if instance is None else b"\x00" + instance + b"\0"
    return b"CGMDv2:" + struct.pack("=i", generation) + group + b"\0" + member + b"\0" + tail


@pytest.mark.parametrize("instance", [None, b"static-1"])
def test_generation_and_member_id_are_read_from_the_serialized_metadata(
    instance: bytes | None,
) -> None:
    blob = cgmd(17, b"eoslab-run", b"rdkafka-1b2c", instance)
    assert parse(blob) == Membership("rdkafka-1b2c", 17)


@pytest.mark.parametrize("blob", [b"", b"CGMDv1:\0\0\0\0g\0m\0\1", b"CGMDv2:\1\0"])
def test_other_bytes_are_refused(blob: bytes) -> None:
    with pytest.raises(GroupMetadataError):
        parse(blob)


def test_a_real_consumer_outside_any_generation_has_no_membership() -> None:
    """librdkafka itself serializes it (nothing listens on the bootstrap address)."""
    consumer = Consumer(
        {"bootstrap.servers": "127.0.0.1:9", "group.id": "eoslab-g", "log_level": 0}
    )
    try:
        assert consumer.consumer_group_metadata().startswith(b"CGMDv2:")
        assert membership(consumer) == NO_MEMBERSHIP
    finally:
        consumer.close()
