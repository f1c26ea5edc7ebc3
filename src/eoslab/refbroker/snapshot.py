"""Producer-state snapshot files `<offset, 20 digits>.snapshot`, like Kafka's.

A snapshot at offset X holds the producer state after every batch below X; recovery loads the
newest readable one and replays the log from X. The layout follows Kafka's (version int16,
CRC-32C uint32 over the rest, then the entries) but keeps every retained batch of a producer,
not only its last one, so that a retry of any of them after a restart is still deduplicated.
Each entry carries the first offset of the producer's open transaction (-1 when none), as
Kafka's does, so the partition's open transactions (and its last stable offset) come back.
A snapshot of another version is unreadable: recovery then replays the log from its start.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable
from pathlib import Path

from crc32c import crc32c

from eoslab.refbroker.durable_files import write_atomically
from eoslab.refbroker.producer_state import BatchMetadata, ProducerStateEntry

SUFFIX = ".snapshot"
VERSION = 2
PREFIX = struct.Struct(">hI")  # version, crc
COUNT = struct.Struct(">i")
ENTRY = struct.Struct(">qhiqqi")
"""producer id, epoch, coordinator epoch, last timestamp, open transaction's first offset, batches"""
BATCH = struct.Struct(">iiqiq")  # first seq, last seq, last offset, offset delta, timestamp


class CorruptSnapshotError(Exception):
    pass


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SUFFIX}"


def snapshot_offsets(directory: Path) -> list[int]:
    return sorted(
        int(path.name.removesuffix(SUFFIX))
        for path in directory.glob(f"*{SUFFIX}")
        if path.name.removesuffix(SUFFIX).isdigit()
    )


def encode(entries: Iterable[ProducerStateEntry]) -> bytes:
    entries = list(entries)
    body = [COUNT.pack(len(entries))]
    for entry in entries:
        body.append(
            ENTRY.pack(
                entry.producer_id,
                entry.producer_epoch,
                entry.coordinator_epoch,
                entry.last_timestamp,
                entry.current_txn_first_offset,
                len(entry.batch_metadata),
            )
        )
        body.extend(
            BATCH.pack(b.first_seq, b.last_seq, b.last_offset, b.offset_delta, b.timestamp)
            for b in entry.batch_metadata
        )
    payload = b"".join(body)
    return PREFIX.pack(VERSION, crc32c(payload)) + payload


def decode(data: bytes) -> list[ProducerStateEntry]:
    try:
        version, crc = PREFIX.unpack_from(data, 0)
        if version != VERSION:
            raise CorruptSnapshotError(f"unknown snapshot version {version}")
        if crc32c(data[PREFIX.size :]) != crc:
            raise CorruptSnapshotError("snapshot CRC-32C mismatch")
        position = PREFIX.size
        (count,) = COUNT.unpack_from(data, position)
        position += COUNT.size
        entries = []
        for _ in range(count):
            pid, epoch, coordinator_epoch, last_timestamp, txn_first, batches = ENTRY.unpack_from(
                data, position
            )
            position += ENTRY.size
            metadata: deque[BatchMetadata] = deque()
            for _ in range(batches):
                metadata.append(BatchMetadata(*BATCH.unpack_from(data, position)))
                position += BATCH.size
            entries.append(
                ProducerStateEntry(
                    pid, epoch, metadata, last_timestamp, coordinator_epoch, txn_first
                )
            )
    except struct.error as exc:
        raise CorruptSnapshotError(f"truncated snapshot: {exc}") from exc
    if position != len(data):
        raise CorruptSnapshotError(f"{len(data) - position} trailing bytes")
    return entries


def write_snapshot(
    directory: Path, offset: int, entries: Iterable[ProducerStateEntry], sync: bool = True
) -> Path:
    path = snapshot_path(directory, offset)
    write_atomically(path, encode(entries), sync=sync)
    return path


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    return decode(path.read_bytes())
