"""The log of one partition: segments on disk plus its producer state (Kafka's UnifiedLog, one replica).

Directory `<data_dir>/<topic>-<partition>/` holds `<base>.log/.index/.timeindex` segments,
`<offset>.snapshot` producer-state snapshots (taken on roll, on close and after DeleteRecords),
`log-start-offset` (Kafka's log-start-offset-checkpoint, one partition per file) and the
aborted transactions (txn_index.py).

Transactions: the last stable offset (LSO) is the first offset of the oldest open transaction,
or the log end offset when none is open (there is no replication: the high watermark is the log
end offset). A read_committed fetch reads below the LSO only; the transaction coordinator ends a
transaction by appending a marker (control_batch.py) to each of its partitions.
"""

from __future__ import annotations

import bisect
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path

from kio.schema.errors import ErrorCode

from eoslab.clock import now_ms
from eoslab.refbroker import snapshot
from eoslab.refbroker.batch_header import (
    BatchHeader,
    InvalidRecordsError,
    validate_produce_records,
    with_base_offset,
)
from eoslab.refbroker.control_batch import (
    EndTxnMarker,
    end_txn_marker_batch,
    read_end_txn_marker,
)
from eoslab.refbroker.durable_files import fsync_dir, write_atomically
from eoslab.refbroker.producer_state import (
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateError,
    ProducerStateManager,
)
from eoslab.refbroker.segment import LogSegment, segment_base_offsets
from eoslab.refbroker.txn_index import AbortedTxn, TransactionIndex

LOG_START_OFFSET_FILE = "log-start-offset"
SNAPSHOTS_KEPT = 2
LEADER_EPOCH = 0
"""A single replica never changes leader: every partition stays in its first epoch."""
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
    cache_differs: bool = False
    """The duplicate cache answered otherwise than Kafka's 5-batch cache would have (a
    ``retained-batches`` fault at work)."""
    judged_by: str | None = None
    """The producer-state rule set the batch was judged by (None: no producer id, no rules)."""


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

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self.producers.first_unstable_offset()
        return self.log_end_offset if first_unstable is None else first_unstable

    # ---------------------------------------------------------------- append

    def append(
        self, records: bytes, now_ms: int, verify: Callable[[BatchHeader], None] | None = None
    ) -> AppendResult:
        """Validate and append the `records` of one partition of a Produce request. `verify`
        (a transactional Produce) checks with the transaction coordinator a transactional batch
        of a producer that has no transaction open here yet; it raises ProducerStateError. A
        batch with a producer id says which rule set judged it (``judged_by``)."""
        try:
            header = validate_produce_records(records, self._max_batch_bytes)
        except InvalidRecordsError as refused:
            return self._refused(refused.error, str(refused))
        if not header.has_producer_id:
            return self._write(records, header, None)
        result = self._idempotent_append(records, header, now_ms, verify)
        return replace(result, judged_by=str(self.producers.rules))

    def _idempotent_append(
        self,
        records: bytes,
        header: BatchHeader,
        now_ms: int,
        verify: Callable[[BatchHeader], None] | None,
    ) -> AppendResult:
        """A batch of an idempotent or transactional producer, judged by the producer state."""
        if (
            verify is not None
            and header.is_transactional
            and not self.producers.has_ongoing_txn(header.producer_id)
        ):
            try:
                verify(header)
            except ProducerStateError as refused:
                return self._refused(refused.error, str(refused))
        self.producers.remove_expired(now_ms, producer_id=header.producer_id)
        duplicate = self.producers.find_duplicate_batch(header)
        differs = self.producers.cache_differs(header, duplicate)
        if duplicate is not None:
            return AppendResult(
                ErrorCode.none,
                duplicate.first_offset,
                self._log_start_offset,
                duplicate=True,
                cache_differs=differs,
            )
        try:
            info = self.producers.prepare_update(header)
        except ProducerStateError as refused:
            return replace(self._refused(refused.error, str(refused)), cache_differs=differs)
        return self._write(records, header, info)

    def _write(
        self, records: bytes, header: BatchHeader, info: ProducerAppendInfo | None
    ) -> AppendResult:
        """Append a batch that passed its checks, and record it in the producer state."""
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

    def append_end_txn_marker(
        self, producer_id: int, producer_epoch: int, marker: EndTxnMarker, now_ms: int
    ) -> AppendResult:
        """Append a transaction marker (the coordinator's WriteTxnMarkers) and close the
        producer's transaction here; an ABORT of a transaction that wrote here is indexed."""
        try:
            self.producers.check_end_txn_marker(
                producer_id, producer_epoch, marker.coordinator_epoch
            )
        except ProducerStateError as refused:
            return self._refused(refused.error, str(refused))
        base_offset = self.log_end_offset
        batch = end_txn_marker_batch(producer_id, producer_epoch, marker, now_ms, LEADER_EPOCH)
        header = replace(BatchHeader.parse(batch), base_offset=base_offset)
        try:
            self._segment_for(header.size).append(with_base_offset(batch, base_offset), header)
            self._complete_txn(header, marker)
        except OSError as exc:
            return self._refused(ErrorCode.kafka_storage_error, f"marker append failed: {exc}")
        return AppendResult(ErrorCode.none, base_offset, self._log_start_offset)

    def _complete_txn(self, header: BatchHeader, marker: EndTxnMarker) -> None:
        completed = self.producers.complete_txn(
            header.producer_id,
            header.producer_epoch,
            marker.coordinator_epoch,
            offset=header.base_offset,
            timestamp=header.max_timestamp,
            aborted=not marker.commit,
        )
        if completed is not None and completed.is_aborted:
            self._txn_index.append(self._aborted(completed))

    def _aborted(self, completed: CompletedTxn) -> AbortedTxn:
        return AbortedTxn(
            completed.producer_id,
            completed.first_offset,
            completed.last_offset,
            min(self.last_stable_offset, completed.last_offset + 1),
        )

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
        return self._read(offset, max_bytes, self.log_end_offset)[0]

    def read_committed(self, offset: int, max_bytes: int) -> tuple[bytes, list[AbortedTxn]]:
        """A read_committed fetch: whole batches below the LSO, and the aborted transactions
        of the range read (Kafka's: up to the first offset index entry past the bytes read, or
        the end of that segment; nothing when nothing is read)."""
        self._check_in_range(offset)
        data, upper_bound = self._read(offset, max_bytes, self.last_stable_offset)
        return data, self._txn_index.collect(offset, upper_bound) if data else []

    def _read(self, offset: int, max_bytes: int, limit: int) -> tuple[bytes, int]:
        """(batches from `offset`, none starting at or past `limit`; the fetch upper bound:
        Kafka's, from the segment the read starts in, and at least past the last batch read,
        since a read here may go on into the next segment where Kafka's stops)."""
        chunks: list[bytes] = []
        total = read_end = 0
        first = self._segment_index(offset)
        for segment in self._segments[first:]:
            start = segment.position_of(offset)
            end = start
            for position, header in segment.batches(start):
                if header.base_offset >= limit or (total and total + header.size > max_bytes):
                    break
                end = position + header.size
                total += header.size
                read_end = header.last_offset + 1
            if end > start:
                chunks.append(segment.read_bytes(start, end - start))
            if end < segment.size:
                break
        segment = self._segments[first]
        upper = segment.fetch_upper_bound_offset(segment.position_of(offset), total)
        if upper is None:
            following = self._segments[first + 1 : first + 2]
            upper = following[0].base_offset if following else self.log_end_offset
        return b"".join(chunks), max(upper, read_end)

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

    def list_offset(self, timestamp: int, read_committed: bool = False) -> tuple[int, int]:
        """ListOffsets at batch granularity: a batch's max timestamp stands for its records.
        Under read_committed the latest offset is the LSO, and a lookup finds nothing at or
        past it (Partition.fetchOffsetForTimestamp's lastFetchableOffset)."""
        fetchable = self.last_stable_offset if read_committed else self.log_end_offset
        if timestamp == EARLIEST_TIMESTAMP:
            return self._log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return fetchable, -1
        found = self._max_timestamp_offset() if timestamp == MAX_TIMESTAMP else self._at(timestamp)
        return found if found[0] < fetchable else (-1, -1)

    def _at(self, timestamp: int) -> tuple[int, int]:
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
                current_txn_start_offset=entry.current_txn_first_offset,
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
        self._txn_index = TransactionIndex(
            self.directory, sync=self._sync_every_batch, log_end_offset=self.log_end_offset
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
            for position, header in segment.batches(segment.position_of(start)):
                if not header.has_producer_id or header.base_offset < start:
                    continue
                if not header.is_control:
                    self.producers.update(ProducerAppendInfo.of(header), header.base_offset)
                elif marker := read_end_txn_marker(
                    segment.read_bytes(position, header.size), header
                ):
                    self._complete_txn(header, marker)
