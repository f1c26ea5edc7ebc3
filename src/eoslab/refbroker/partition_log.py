"""The log of one partition: segments on disk plus its producer state (Kafka's UnifiedLog, one replica).

Directory `<data_dir>/<topic>-<partition>/` holds `<base>.log/.index/.timeindex` segments,
`<offset>.snapshot` producer-state snapshots (taken on roll, on close and after DeleteRecords),
and `log-start-offset` (Kafka's log-start-offset-checkpoint, one partition per file).
"""

from __future__ import annotations

import bisect
import shutil
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path

from kio.schema.errors import ErrorCode

from eoslab.clock import now_ms
from eoslab.refbroker import snapshot
from eoslab.refbroker.batch_header import (
    InvalidRecordsError,
    validate_produce_records,
    with_base_offset,
)
from eoslab.refbroker.durable_files import fsync_dir, write_atomically
from eoslab.refbroker.producer_state import (
    ProducerAppendInfo,
    ProducerStateError,
    ProducerStateManager,
)
from eoslab.refbroker.segment import LogSegment, segment_base_offsets

LOG_START_OFFSET_FILE = "log-start-offset"
SNAPSHOTS_KEPT = 2
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


class OffsetOutOfRangeError(Exception):
    """An offset outside [log start offset, log end offset]."""


@dataclass(frozen=True)
class AppendResult:
    error: ErrorCode
    base_offset: int = -1
    log_start_offset: int = -1
    duplicate: bool = False
    error_message: str | None = None


@dataclass(frozen=True)
class ProducerView:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int = -1
    current_txn_start_offset: int = -1


class PartitionLog:
    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        producers: ProducerStateManager,
        *,
        sync_every_batch: bool,
        segment_bytes: int,
        max_batch_bytes: int,
    ) -> None:
        """Open the partition in `directory`, creating it if new and recovering it otherwise."""
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.producers = producers
        self._sync_every_batch = sync_every_batch
        self._segment_bytes = segment_bytes
        self._max_batch_bytes = max_batch_bytes
        if not directory.exists():
            directory.mkdir(parents=True)
            fsync_dir(directory.parent)
        self._segments: list[LogSegment] = []
        self._log_start_offset = 0
        self.recovered_bytes_truncated = self._recover()

    # ---------------------------------------------------------------- offsets

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    # ---------------------------------------------------------------- append

    def append(self, records: bytes, now_ms: int) -> AppendResult:
        """Validate and append the `records` of one partition of a Produce request."""
        try:
            header = validate_produce_records(records, self._max_batch_bytes)
        except InvalidRecordsError as refused:
            return self._refused(refused.error, str(refused))
        info = None
        if header.has_producer_id:
            self.producers.remove_expired(now_ms, producer_id=header.producer_id)
            duplicate = self.producers.find_duplicate_batch(header)
            if duplicate is not None:
                return AppendResult(
                    ErrorCode.none, duplicate.first_offset, self._log_start_offset, duplicate=True
                )
            try:
                info = self.producers.prepare_update(header)
            except ProducerStateError as refused:
                return self._refused(refused.error, str(refused))
        base_offset = self.log_end_offset
        batch = with_base_offset(records, base_offset)
        try:
            segment = self._segment_for(header.size)
            segment.append(batch, replace(header, base_offset=base_offset))
        except OSError as exc:
            return self._refused(ErrorCode.kafka_storage_error, f"append failed: {exc}")
        if info is not None:
            self.producers.update(info, base_offset)
        return AppendResult(ErrorCode.none, base_offset, self._log_start_offset)

    def _refused(self, error: ErrorCode, message: str) -> AppendResult:
        return AppendResult(error, log_start_offset=self._log_start_offset, error_message=message)

    def _segment_for(self, batch_size: int) -> LogSegment:
        active = self._segments[-1]
        if active.size > 0 and active.size + batch_size > self._segment_bytes:
            return self._roll()
        return active

    def _roll(self) -> LogSegment:
        self._segments[-1].seal()
        segment = LogSegment(self.directory, self.log_end_offset, self._sync_every_batch)
        self._segments.append(segment)
        self._take_snapshot()
        return segment

    # ---------------------------------------------------------------- read

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one containing `offset`; at least one batch unless at the end."""
        self._check_in_range(offset)
        chunks: list[bytes] = []
        total = 0
        for segment in self._segments[self._segment_index(offset) :]:
            start = segment.position_of(offset)
            end = start
            for position, header in segment.batches(start):
                if total and total + header.size > max_bytes:
                    break
                end = position + header.size
                total += header.size
            if end > start:
                chunks.append(segment.read_bytes(start, end - start))
            if end < segment.size:
                break
        return b"".join(chunks)

    def _check_in_range(self, offset: int) -> None:
        if not self._log_start_offset <= offset <= self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} outside [{self._log_start_offset}, {self.log_end_offset}] "
                f"of {self.topic}-{self.partition}"
            )

    def _segment_index(self, offset: int) -> int:
        bases = [segment.base_offset for segment in self._segments]
        return max(bisect.bisect_right(bases, offset) - 1, 0)

    # ---------------------------------------------------------------- list offsets

    def list_offset(self, timestamp: int) -> tuple[int, int]:
        """ListOffsets at batch granularity: a batch's max timestamp stands for its records."""
        if timestamp == EARLIEST_TIMESTAMP:
            return self._log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return self.log_end_offset, -1
        if timestamp == MAX_TIMESTAMP:
            return self._max_timestamp_offset()
        if timestamp < 0:
            return -1, -1
        for segment in self._segments:
            if segment.max_timestamp < timestamp:
                continue
            for _, header in segment.batches(segment.first_position_with_timestamp(timestamp)):
                if (
                    header.last_offset >= self._log_start_offset
                    and header.max_timestamp >= timestamp
                ):
                    return max(header.base_offset, self._log_start_offset), header.max_timestamp
        return -1, -1

    def _max_timestamp_offset(self) -> tuple[int, int]:
        best = max(self._segments, key=lambda s: s.max_timestamp)
        for _, header in best.batches():
            if (
                header.max_timestamp == best.max_timestamp
                and header.last_offset >= self._log_start_offset
            ):
                return header.last_offset, header.max_timestamp
        return -1, -1

    # ---------------------------------------------------------------- delete records

    def delete_records(self, before_offset: int) -> int:
        """Advance the log start offset (-1: to the high watermark) and drop whole segments below it."""
        target = self.log_end_offset if before_offset == -1 else before_offset
        if not 0 <= target <= self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {before_offset}: log end offset is "
                f"{self.log_end_offset} in {self.topic}-{self.partition}"
            )
        if target <= self._log_start_offset:
            return self._log_start_offset
        self._log_start_offset = target
        write_atomically(self.directory / LOG_START_OFFSET_FILE, str(target).encode())
        if target == self.log_end_offset and self._segments[-1].size > 0:
            self._roll()
        while len(self._segments) > 1 and self._segments[1].base_offset <= target:
            self._segments.pop(0).delete()
        self.producers.on_log_start_offset_incremented(target)
        self._take_snapshot()
        return target

    # ---------------------------------------------------------------- producers

    def active_producers(self) -> list[ProducerView]:
        return [
            ProducerView(
                producer_id=entry.producer_id,
                producer_epoch=entry.producer_epoch,
                last_sequence=entry.last_seq,
                last_timestamp=entry.last_timestamp,
                coordinator_epoch=entry.coordinator_epoch,
            )
            for entry in self.producers.active_producers()
        ]

    # ---------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Flush segments and write a producer-state snapshot at the log end offset."""
        self._segments[-1].flush()
        self._take_snapshot()
        for segment in self._segments:
            segment.close()

    def delete(self) -> None:
        for segment in self._segments:
            segment.close()
        shutil.rmtree(self.directory)

    def _take_snapshot(self) -> None:
        offset = self.log_end_offset
        snapshot.write_snapshot(self.directory, offset, self.producers.active_producers())
        for stale in snapshot.snapshot_offsets(self.directory)[:-SNAPSHOTS_KEPT]:
            snapshot.snapshot_path(self.directory, stale).unlink(missing_ok=True)

    def _recover(self) -> int:
        """Open the segments, verify the last one, then rebuild producer state from the newest
        usable snapshot plus the batches after it."""
        checkpoint = self.directory / LOG_START_OFFSET_FILE
        if checkpoint.exists():
            self._log_start_offset = int(checkpoint.read_text().strip() or 0)
        bases = segment_base_offsets(self.directory) or [self._log_start_offset]
        self._segments = [
            LogSegment(self.directory, base, self._sync_every_batch) for base in bases
        ]
        for segment, following in pairwise(self._segments):
            segment.load_indexes(following.base_offset)
        truncated = self._segments[-1].recover()
        self._log_start_offset = max(
            min(self._log_start_offset, self.log_end_offset), self._segments[0].base_offset
        )
        self._rebuild_producer_state()
        return truncated

    def _rebuild_producer_state(self) -> None:
        loaded_ms = now_ms()
        end = self.log_end_offset
        start = self._segments[0].base_offset
        for offset in reversed(snapshot.snapshot_offsets(self.directory)):
            path = snapshot.snapshot_path(self.directory, offset)
            if offset > end:
                path.unlink()
                continue
            try:
                entries = snapshot.read_snapshot(path)
            except snapshot.CorruptSnapshotError:
                path.unlink()
                continue
            self.producers.load(entries, loaded_ms, self._log_start_offset)
            start = max(offset, start)
            break
        for segment in self._segments:
            if segment.next_offset <= start:
                continue
            for _, header in segment.batches(segment.position_of(start)):
                if header.has_producer_id and header.base_offset >= start:
                    self.producers.update(ProducerAppendInfo.of(header), header.base_offset)
