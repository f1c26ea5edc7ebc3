"""Transaction markers: the control batch a transaction coordinator writes into every partition of
a transaction when it ends (Kafka's EndTransactionMarker, KIP-98).

A marker is a v2 record batch with the transactional and control attributes, the producer's id
and epoch, no sequence (-1), and one record whose key is (version 0 int16, type int16: 0 ABORT,
1 COMMIT) and whose value is (version 0 int16, coordinator epoch int32). Consumers skip it; a
read_committed consumer uses the ABORT ones, through the fetch's aborted-transactions list, to
drop the aborted transaction's records.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c

from eoslab.refbroker.batch_header import (
    CONTROL_FLAG,
    CRC_COVERED_FROM,
    CURRENT_MAGIC,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_SEQUENCE,
    TRANSACTIONAL_FLAG,
    BatchHeader,
)

MARKER_KEY = struct.Struct(">hh")  # version, control type
MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch
ABORT, COMMIT = 0, 1
CRC_POSITION = 17  # baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8


@dataclass(frozen=True)
class EndTxnMarker:
    commit: bool
    coordinator_epoch: int


def _varint(value: int) -> bytes:
    """A zigzag varint, as record fields are encoded."""
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    """(value, next position) of the zigzag varint at `position`."""
    shift = zigzag = 0
    while True:
        if position >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[position]
        position += 1
        zigzag |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (zigzag >> 1) ^ -(zigzag & 1), position
        shift += 7


def end_txn_marker_batch(
    producer_id: int,
    producer_epoch: int,
    marker: EndTxnMarker,
    timestamp_ms: int,
    leader_epoch: int,
) -> bytes:
    """The control batch at base offset 0 (the log sets the real one)."""
    key = MARKER_KEY.pack(0, COMMIT if marker.commit else ABORT)
    value = MARKER_VALUE.pack(0, marker.coordinator_epoch)
    body = (
        b"\x00"  # record attributes
        + _varint(0)  # timestamp delta
        + _varint(0)  # offset delta
        + _varint(len(key))
        + key
        + _varint(len(value))
        + value
        + _varint(0)  # no headers
    )
    record = _varint(len(body)) + body
    header = HEADER.pack(
        0,
        HEADER_SIZE - LOG_OVERHEAD + len(record),
        leader_epoch,
        CURRENT_MAGIC,
        0,
        TRANSACTIONAL_FLAG | CONTROL_FLAG,
        0,
        timestamp_ms,
        timestamp_ms,
        producer_id,
        producer_epoch,
        NO_SEQUENCE,
        1,
    )
    batch = bytearray(header + record)
    struct.pack_into(">I", batch, CRC_POSITION, crc32c(bytes(batch[CRC_COVERED_FROM:])))
    return bytes(batch)


def read_end_txn_marker(batch: bytes, header: BatchHeader) -> EndTxnMarker | None:
    """The marker of a control batch read from the log; None for a control record of another
    kind (or one this broker cannot read, which it never wrote)."""
    if not header.is_control or header.records_count != 1:
        return None
    try:
        position = _read_varint(batch, HEADER_SIZE)[1] + 1  # record length, attributes
        for _ in range(2):  # timestamp and offset deltas
            position = _read_varint(batch, position)[1]
        key_length, position = _read_varint(batch, position)
        if key_length != MARKER_KEY.size:
            return None
        _, control_type = MARKER_KEY.unpack_from(batch, position)
        value_length, position = _read_varint(batch, position + key_length)
        if control_type not in (ABORT, COMMIT) or value_length < MARKER_VALUE.size:
            return None
        _, coordinator_epoch = MARKER_VALUE.unpack_from(batch, position)
    except (ValueError, struct.error):
        return None
    return EndTxnMarker(control_type == COMMIT, coordinator_epoch)
