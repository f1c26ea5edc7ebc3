"""Builds v2 record batches as a producer sends them (base offset 0), for the storage tests.

Records are encoded with kio's record writer; the header is packed by hand so that compressed
(gzip) batches, which kio cannot write, are built the same way.
"""

from __future__ import annotations

import datetime
import gzip
import io
import struct

from crc32c import crc32c
from kio.records.schema import Record
from kio.records.writers import write_record
from kio.static.primitive import TZAwareMicros, i8, i64

POST_CRC = struct.Struct(">hiqqqhii")
GZIP = 1
TRANSACTIONAL = 0x10
BASE_TIMESTAMP = 1_700_000_000_000


def make_batch(
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    count: int = 1,
    *,
    timestamp_ms: int = BASE_TIMESTAMP,
    compressed: bool = False,
    transactional: bool = False,
    value: bytes = b"value",
) -> bytes:
    moment = TZAwareMicros.parse(datetime.datetime.fromtimestamp(timestamp_ms / 1000, datetime.UTC))
    body = io.BytesIO()
    for i in range(count):
        record = Record(
            attributes=i8(0),
            timestamp=moment,
            offset=i64(i),
            key=f"k{i}".encode(),
            value=value + str(i).encode(),
            headers=(),
        )
        write_record(body, record, i64(timestamp_ms), i64(0))
    records = gzip.compress(body.getvalue(), mtime=0) if compressed else body.getvalue()
    post = (
        POST_CRC.pack(
            (GZIP if compressed else 0) | (TRANSACTIONAL if transactional else 0),
            count - 1,
            timestamp_ms,
            timestamp_ms,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
        + records
    )
    crc = crc32c(post)
    return struct.pack(">qiibI", 0, 9 + len(post), 0, 2, crc) + post
