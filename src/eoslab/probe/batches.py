"""Record batches (magic v2) for crafted Produce requests, and reading them back from Fetch."""

from __future__ import annotations

import datetime
import io
from collections.abc import Sequence

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record, RecordBatch
from kio.records.writers import write_batch
from kio.serial.readers import read_int32
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

NO_COMPRESSION = i16(0)
TRANSACTIONAL = 0x10
"""The batch attribute of a transaction's records."""
BASE_OFFSET_SIZE = 8
LOG_OVERHEAD = 12
"""base offset (int64) + batch length (int32): what precedes the counted part of a batch."""


def record_batch(
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    values: Sequence[bytes],
    *,
    keys: Sequence[bytes | None] | None = None,
    timestamp: datetime.datetime | None = None,
    transactional: bool = False,
) -> bytes:
    """One uncompressed batch of `values` (with `keys`, default none), sequences
    base_sequence .. base_sequence+len-1; `transactional`: part of a transaction."""
    at = TZAwareMicros.parse(timestamp or datetime.datetime.now(datetime.UTC))
    record_keys = [None] * len(values) if keys is None else keys
    batch = NewRecordBatch(
        producer_id=i64(producer_id),
        producer_epoch=i16(producer_epoch),
        base_sequence=i32(base_sequence),
        attributes=i16(TRANSACTIONAL if transactional else NO_COMPRESSION),
        records=tuple(
            Record(
                attributes=i8(0),
                timestamp=at,
                offset=i64(delta),
                key=key,
                value=value,
                headers=(),
            )
            for delta, (key, value) in enumerate(zip(record_keys, values, strict=True))
        ),
    )
    buffer = io.BytesIO()
    write_batch(buffer, batch)
    return buffer.getvalue()


def read_batches(records: bytes) -> list[RecordBatch]:
    """Every complete batch in a Fetch response's records (a trailing partial one is skipped,
    as clients do when max_bytes cuts a batch)."""
    batches = []
    offset = 0
    while offset + LOG_OVERHEAD <= len(records):
        batch_length, _ = read_int32(records, offset + BASE_OFFSET_SIZE)
        if offset + LOG_OVERHEAD + batch_length > len(records):
            break
        batch, size = read_batch(records, offset)
        batches.append(batch)
        offset += size
    return batches
