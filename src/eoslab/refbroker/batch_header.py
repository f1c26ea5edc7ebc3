"""The fixed 61-byte header of a v2 record batch (KIP-98), and validation of a Produce `records` field.

The header is parsed with one `struct` over its fixed layout instead of kio's `read_batch`
(kio.records.readers): read_batch decodes every record, which is slow on the append path and
impossible for compressed batches, and the storage layer must never decompress. Everything the producer-state rules and the
log need (offsets, sequences, producer id/epoch, timestamps) sits in the header.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c
from kio.schema.errors import ErrorCode

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
MAGIC_OFFSET = 16
CRC_COVERED_FROM = 21  # the CRC covers attributes .. end of batch (not baseOffset, not itself)
CURRENT_MAGIC = 2
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
MAX_SEQUENCE = 2**31 - 1
CONTROL_FLAG = 0x20
TRANSACTIONAL_FLAG = 0x10


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequences wrap from 2^31-1 to 0 (DefaultRecordBatch.incrementSequence)."""
    if sequence > MAX_SEQUENCE - increment:
        return increment - (MAX_SEQUENCE - sequence) - 1
    return sequence + increment


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def parse(cls, buffer: bytes | memoryview, position: int = 0) -> BatchHeader:
        """Parse the header at `position`; the caller guarantees HEADER_SIZE bytes are there."""
        return cls(*HEADER.unpack_from(buffer, position))

    @property
    def size(self) -> int:
        """Bytes of the whole batch on disk and on the wire."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)


def crc_is_valid(batch: bytes | memoryview, header: BatchHeader) -> bool:
    return crc32c(batch[CRC_COVERED_FROM : header.size]) == header.crc


def with_base_offset(batch: bytes, base_offset: int) -> bytes:
    """The batch with baseOffset rewritten; the CRC stays valid since it does not cover that field."""
    return struct.pack(">q", base_offset) + batch[8:]


class InvalidRecordsError(Exception):
    """A Produce `records` field that must be refused; carries the error code for the response."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


def validate_produce_records(records: bytes, max_batch_bytes: int) -> BatchHeader:
    """Check a Produce request's `records` for one partition; return the header of its single batch.

    Mirrors ProduceRequest.validateRecords and LogValidator.validateBatch of Kafka 3.9 for a
    client append, with Kafka's error codes: empty, torn (Kafka's iterator then sees no whole
    batch) or several batches, magic 0/1, bad offsets/count, control batches, negative
    sequences -> INVALID_RECORD; a bad batch length or CRC -> CORRUPT_MESSAGE.
    """
    if not records:
        raise InvalidRecordsError(ErrorCode.invalid_record, "no record batch in the partition data")
    if len(records) <= MAGIC_OFFSET:
        raise InvalidRecordsError(ErrorCode.invalid_record, f"{len(records)} bytes is a torn batch")
    magic = records[MAGIC_OFFSET]
    if magic < CURRENT_MAGIC:
        raise InvalidRecordsError(
            ErrorCode.invalid_record, f"magic {magic}: Produce v3+ accepts only v2 record batches"
        )
    if magic > CURRENT_MAGIC:
        raise InvalidRecordsError(ErrorCode.corrupt_message, f"unknown magic byte {magic}")
    if len(records) < HEADER_SIZE:
        raise InvalidRecordsError(ErrorCode.invalid_record, f"{len(records)} bytes is a torn batch")
    header = BatchHeader.parse(records)
    if header.size < HEADER_SIZE:
        raise InvalidRecordsError(ErrorCode.corrupt_message, f"batch length {header.batch_length}")
    if header.size > len(records):
        raise InvalidRecordsError(
            ErrorCode.invalid_record,
            f"batch declares {header.size} bytes, only {len(records)} received",
        )
    if header.size < len(records):
        raise InvalidRecordsError(ErrorCode.invalid_record, "exactly one record batch is allowed")
    if header.size > max_batch_bytes:
        raise InvalidRecordsError(
            ErrorCode.message_too_large, f"batch of {header.size} bytes > {max_batch_bytes}"
        )
    if not crc_is_valid(records, header):
        raise InvalidRecordsError(ErrorCode.corrupt_message, "record batch CRC-32C mismatch")
    if header.last_offset_delta < 0 or header.records_count != header.last_offset_delta + 1:
        raise InvalidRecordsError(
            ErrorCode.invalid_record,
            f"last offset delta {header.last_offset_delta} and count {header.records_count}",
        )
    if header.is_control:
        raise InvalidRecordsError(ErrorCode.invalid_record, "clients may not write control batches")
    if header.has_producer_id and header.base_sequence < 0:
        raise InvalidRecordsError(
            ErrorCode.invalid_record, f"invalid sequence number {header.base_sequence}"
        )
    return header
