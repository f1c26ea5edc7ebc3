"""The guard against lying lengths walks every request exactly as kio reads it, and refuses a
count or length beyond the bytes that remain (Kafka's "Tried to allocate a collection of size
N, but there are only M bytes remaining")."""

from __future__ import annotations

import struct

import pytest
from kio.index import load_request_schema
from kio.schema.metadata.v5.request import MetadataRequest as MetadataRequestV5
from kio.schema.metadata.v5.request import MetadataRequestTopic

from eoslab.kafka_api import encode_request
from eoslab.refbroker.apis import api_handlers
from eoslab.refbroker.length_guard import LyingLengthError, check_lengths
from eoslab.soak.mutator import FrameMutator

SERVED = {key: (h.min_version, h.max_version) for key, h in api_handlers().items()}
KILLER = bytes.fromhex(
    "0003000b000074bfffff00e8a5d8bb24ebd5a5b44691cacdf456850706721c6e6765f5756e20adbd84ea6ab4"
    "8d7937c83535fc0c736f036b2d6d656d62657200010100"
)
"""Found by `make soak`: Metadata v11 whose topics count (a 5-byte varint) is 9,788,855,015;
kio's native reader asked for 78 GB and the process aborted."""


def walk(body: bytes, api_key: int, api_version: int) -> int:
    request_type = load_request_schema(api_key, api_version)
    return check_lengths(request_type, body, check_lengths(request_type.__header_schema__, body))


def test_every_well_formed_request_is_walked_to_its_last_byte() -> None:
    """Valid requests (and ones with boundary values) of every served version: the walk ends
    exactly where the frame does, so it never refuses what kio can read."""
    kept = ("valid", "field-extreme", "records-garbage", "records-bad-crc")
    frames = [f for f in FrameMutator(9, SERVED).take(20_000) if f.mutation in kept]
    assert len({(f.api_key, f.api_version) for f in frames}) == sum(
        high - low + 1 for low, high in SERVED.values()
    )
    for frame in frames:
        assert walk(frame.data[4:], frame.api_key, frame.api_version) == len(frame.data) - 4


def test_the_count_that_killed_the_broker_is_refused() -> None:
    with pytest.raises(LyingLengthError, match="collection of size 9788855015"):
        walk(KILLER, 3, 11)


def test_legacy_counts_and_compact_lengths_that_lie_are_refused() -> None:
    body = encode_request(
        MetadataRequestV5(
            topics=(MetadataRequestTopic(name="t"),), allow_auto_topic_creation=False
        ),
        0,
        "c",
    )[4:]
    count_at = len(body) - 1 - 1 - 2 - 4  # allow_auto, "t", its length, the count
    assert struct.unpack_from(">i", body, count_at)[0] == 1
    lying = body[:count_at] + struct.pack(">i", 2**31 - 1) + body[count_at + 4 :]
    with pytest.raises(LyingLengthError, match="topics: a collection of size 2147483647"):
        walk(lying, 3, 5)
    assert walk(body, 3, 5) == len(body)
    header = KILLER[:11]  # api key, version, correlation id, null client id, no tags
    huge_name = header + b"\x02" + bytes(16) + b"\xff\xff\xff\xff\x0f" + bytes(4)
    with pytest.raises(LyingLengthError, match="name of 4294967294 bytes, but only 4 bytes remain"):
        walk(huge_name, 3, 11)
