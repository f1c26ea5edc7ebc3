"""Idempotent-producer state of one partition: Kafka's ProducerStateManager, kept pure (no I/O).

Per producer id the broker keeps the epoch and the metadata of the last N batches
(ProducerStateEntry.NumBatchesToRetain, 5 in Kafka). A Produce batch is checked against it
before it is appended (ProducerAppendInfo.checkProducerEpoch / checkSequence), and a retry of
one of those N batches is answered with its original offset instead of being appended twice.

Rules of Kafka 3.9 (`kafka-3.9`, storage/.../ProducerAppendInfo.java)
    - same epoch and exact (first seq, last seq) of a cached batch: duplicate, answered with the
      original base offset, nothing appended;
    - epoch lower than the current one: INVALID_PRODUCER_EPOCH;
    - a higher epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
    - same epoch: first seq must be last seq + 1 (2^31-1 wraps to 0), else
      OUT_OF_ORDER_SEQUENCE_NUMBER;
    - no state for the producer id (new, or expired): any sequence is accepted;
    - state is dropped only by producer-id expiry (producer.id.expiration.ms, idle time measured
      from the last batch's max timestamp), never because its records left the log.

How Kafka 2.0 differs (`kafka-2.0`, core/.../log/ProducerStateManager.scala and Log.scala of 2.0.0)
    1. No state for the producer id and a first sequence != 0: UNKNOWN_PRODUCER_ID (3.9 accepts
       it). This is the error KIP-360 (seed 002) is about.
    2. No state, the batch carries the "no epoch" value -1 and a sequence != 0:
       OUT_OF_ORDER_SEQUENCE_NUMBER ("expected 0"); 3.9 accepts it.
    3. Producer state follows the log: when the log start offset advances (DeleteRecords,
       retention) every producer whose last batch lies below it is removed (truncateHead), and
       such producers are skipped when a snapshot is loaded (isProducerRetained). Its next
       batch then gets UNKNOWN_PRODUCER_ID unless it starts at 0. Kafka 3.9 keeps the state
       until it expires (KIP-360 "prolonged producer state retention", KAFKA-7190).
    4. The cached offset delta of a batch is lastSeq - firstSeq, not lastOffset - firstOffset,
       so a duplicate of a batch whose sequences wrap past 2^31-1 is answered with a wrong base
       offset (lastOffset - (lastSeq - firstSeq)); 3.9 stores the true offset delta.
    Not rule differences, listed to show they were checked:
    - a lower epoch is ProducerFencedException in 2.0 and InvalidProducerEpochException in 3.9
      (KIP-588), but both are error code 47 INVALID_PRODUCER_EPOCH on the wire;
    - 2.0 expires producer ids after transactional.id.expiration.ms (7 days by default), 3.9
      after producer.id.expiration.ms (1 day, KIP-854): same test, now - lastTimestamp >=
      expiration; here both use StorageConfig.producer_id_expiration_ms;
    - 3.9's transaction verification (KIP-890 part 1) asks the transaction coordinator; the
      Produce handler does it (refbroker/transactions), not these rules.

Transactional batches (KIP-98, ProducerAppendInfo and ProducerStateManager of 3.9)
    - the first transactional batch of a producer opens its transaction in this partition
      (ProducerStateEntry.currentTxnFirstOffset): the partition's last stable offset (LSO) cannot
      pass that offset until the transaction's marker is written;
    - a non-transactional batch while the producer's transaction is open: INVALID_TXN_STATE;
    - a marker (appendEndTxnMarker) with an epoch lower than the producer's: INVALID_PRODUCER_EPOCH,
      with a lower coordinator epoch: TRANSACTION_COORDINATOR_FENCED; otherwise it closes the open
      transaction (a CompletedTxn, which the log turns into an aborted-transaction entry on ABORT;
      an empty transaction completes nothing), takes the marker's epoch (a bumped epoch after a
      fence or a timeout clears the cached batches) and its coordinator epoch;
    - a producer with an open transaction never expires (isProducerExpired); kafka-2.0 applies
      the same transactional rules. The `expire-producers` fault removes it anyway, and its
      open transaction with it (its records then count as stable).

`legacy` applies no check at all (negative controls): every batch is appended, no duplicate is
detected; the state is still tracked, open transactions included, so DescribeProducers, the LSO
and read_committed fetches still see it.

Kafka checks expiry every 10 minutes (producer.id.expiration.check.interval.ms); so does the
reference broker (the same option), and it additionally checks the appending producer at every
append, so short expiry times used by scenarios take effect deterministically.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from eoslab.refbroker.batch_header import MAX_SEQUENCE, NO_SEQUENCE, BatchHeader

NO_PRODUCER_EPOCH = -1
NO_TIMESTAMP = -1
NO_OFFSET = -1
DEFAULT_RETAINED_BATCHES = 5  # ProducerStateEntry.NumBatchesToRetain
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS = 600_000
"""producer.id.expiration.check.interval.ms: how often every partition drops its idle producers."""


class Rules(enum.StrEnum):
    KAFKA_3_9 = "kafka-3.9"
    KAFKA_2_0 = "kafka-2.0"
    LEGACY = "legacy"


class ProducerStateError(Exception):
    """A batch refused by the producer-state rules; `error` goes into the Produce response."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batch_metadata: deque[BatchMetadata] = field(default_factory=deque)
    last_timestamp: int = NO_TIMESTAMP
    coordinator_epoch: int = -1
    current_txn_first_offset: int = NO_OFFSET
    """The first offset of the producer's open transaction in this partition, or -1."""
    evicted: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=DEFAULT_RETAINED_BATCHES), compare=False, repr=False
    )
    """The last batches a cache smaller than Kafka's dropped (never a cache larger than it):
    what Kafka's 5-batch cache would still hold, to tell when this one answers otherwise."""

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    def find_duplicate_batch(
        self, epoch: int, first_seq: int, last_seq: int
    ) -> BatchMetadata | None:
        return self._cached(self.batch_metadata, epoch, first_seq, last_seq)

    def kafka_would_find(self, epoch: int, first_seq: int, last_seq: int) -> bool:
        """Whether Kafka's cache (the last :data:`DEFAULT_RETAINED_BATCHES` batches) holds this
        batch: where it and :meth:`find_duplicate_batch` disagree, a cache of another size
        answered a retry otherwise than Kafka would (a duplicate refused, or one let through)."""
        window = [*self.evicted, *self.batch_metadata][-DEFAULT_RETAINED_BATCHES:]
        return self._cached(window, epoch, first_seq, last_seq) is not None

    def _cached(
        self, batches: Iterable[BatchMetadata], epoch: int, first_seq: int, last_seq: int
    ) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for batch in batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def maybe_update_producer_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            self.batch_metadata.clear()
            self.evicted.clear()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, batch: BatchMetadata, retained: int) -> None:
        self.maybe_update_producer_epoch(epoch)
        self.batch_metadata.append(batch)
        self.retain_last(retained)
        self.last_timestamp = batch.timestamp

    def retain_last(self, retained: int) -> None:
        while len(self.batch_metadata) > retained:
            dropped = self.batch_metadata.popleft()
            if retained < DEFAULT_RETAINED_BATCHES:
                self.evicted.append(dropped)


def check_retained_batches(retained: int) -> None:
    if retained < 1:
        raise ValueError(f"at least one batch must be retained, got {retained}")


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)


def check_producer_epoch(entry: ProducerStateEntry, epoch: int) -> None:
    if epoch < entry.producer_epoch:
        raise ProducerStateError(
            ErrorCode.invalid_producer_epoch,
            f"epoch {epoch} of producer {entry.producer_id} is older than {entry.producer_epoch}",
        )


def check_transactional(entry: ProducerStateEntry, is_transactional: bool) -> None:
    if not is_transactional and entry.current_txn_first_offset != NO_OFFSET:
        raise ProducerStateError(
            ErrorCode.invalid_txn_state,
            f"expected a transactional write from producer {entry.producer_id}: its transaction "
            f"is open since offset {entry.current_txn_first_offset}",
        )


def check_sequence(rules: Rules, entry: ProducerStateEntry, epoch: int, first_seq: int) -> None:
    """ProducerAppendInfo.checkSequence for one batch; `entry` is empty for an unknown producer."""
    pid = entry.producer_id
    if epoch != entry.producer_epoch:
        if first_seq == 0:
            return
        if entry.producer_epoch != NO_PRODUCER_EPOCH:
            raise ProducerStateError(
                ErrorCode.out_of_order_sequence_number,
                f"producer {pid}: new epoch {epoch} must start at sequence 0, got {first_seq}",
            )
        if rules is Rules.KAFKA_2_0:
            raise ProducerStateError(
                ErrorCode.unknown_producer_id,
                f"no state for producer {pid} and its sequence {first_seq} is not 0",
            )
        return
    if rules is Rules.KAFKA_3_9 and entry.producer_epoch == NO_PRODUCER_EPOCH:
        return
    if not in_sequence(entry.last_seq, first_seq):
        raise ProducerStateError(
            ErrorCode.out_of_order_sequence_number,
            f"producer {pid}: sequence {first_seq} does not follow {entry.last_seq}",
        )


@dataclass(frozen=True, slots=True)
class ProducerAppendInfo:
    """One batch that passed the rules; `ProducerStateManager.update` records it once it has offsets."""

    producer_id: int
    producer_epoch: int
    first_seq: int
    last_seq: int
    last_offset_delta: int
    max_timestamp: int
    is_transactional: bool = False

    @classmethod
    def of(cls, batch: BatchHeader) -> ProducerAppendInfo:
        return cls(
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            first_seq=batch.base_sequence,
            last_seq=batch.last_sequence,
            last_offset_delta=batch.last_offset_delta,
            max_timestamp=batch.max_timestamp,
            is_transactional=batch.is_transactional,
        )


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker closed in this partition: [first_offset, last_offset (the
    marker's)]."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerStateManager:
    """Producer id -> ProducerStateEntry of one partition, under switchable rules."""

    def __init__(
        self,
        rules: Rules = Rules.KAFKA_3_9,
        retained_batches: int = DEFAULT_RETAINED_BATCHES,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.rules = rules
        self.retained_batches = retained_batches
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        self._ongoing: dict[int, int] = {}
        """First offset -> producer id of every open transaction (ongoingTxns)."""

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def active_producers(self) -> list[ProducerStateEntry]:
        return list(self._producers.values())

    def find_duplicate_batch(self, batch: BatchHeader) -> BatchMetadata | None:
        """The cached batch this one retries, if any (never under `legacy`)."""
        entry = self._producers.get(batch.producer_id)
        if self.rules is Rules.LEGACY or entry is None:
            return None
        return entry.find_duplicate_batch(
            batch.producer_epoch, batch.base_sequence, batch.last_sequence
        )

    def cache_differs(self, batch: BatchHeader, found: BatchMetadata | None) -> bool:
        """Whether the cache's answer to ``batch`` (``found``: :meth:`find_duplicate_batch`'s)
        differs from what Kafka's 5-batch cache would answer: the evidence that a
        ``retained-batches`` fault acted (never under `legacy`, which has no cache)."""
        entry = self._producers.get(batch.producer_id)
        if self.rules is Rules.LEGACY or entry is None:
            return False
        kafka = entry.kafka_would_find(
            batch.producer_epoch, batch.base_sequence, batch.last_sequence
        )
        return kafka != (found is not None)

    def prepare_update(self, batch: BatchHeader) -> ProducerAppendInfo:
        """Validate `batch` against the rules; raises ProducerStateError when it must be refused."""
        if self.rules is not Rules.LEGACY:
            entry = self._producers.get(batch.producer_id) or ProducerStateEntry(batch.producer_id)
            check_producer_epoch(entry, batch.producer_epoch)
            check_sequence(self.rules, entry, batch.producer_epoch, batch.base_sequence)
            check_transactional(entry, batch.is_transactional)
        return ProducerAppendInfo.of(batch)

    def update(self, info: ProducerAppendInfo, base_offset: int) -> None:
        """Record an appended batch whose first offset is `base_offset`."""
        if self.rules is Rules.KAFKA_2_0:
            offset_delta = info.last_seq - info.first_seq  # 2.0: a sequence delta (difference 4)
        else:
            offset_delta = info.last_offset_delta
        metadata = BatchMetadata(
            first_seq=info.first_seq,
            last_seq=info.last_seq,
            last_offset=base_offset + info.last_offset_delta,
            offset_delta=offset_delta,
            timestamp=info.max_timestamp,
        )
        entry = self._producers.setdefault(info.producer_id, ProducerStateEntry(info.producer_id))
        entry.add_batch(info.producer_epoch, metadata, self.retained_batches)
        if info.is_transactional and entry.current_txn_first_offset == NO_OFFSET:
            entry.current_txn_first_offset = base_offset
            self._ongoing[base_offset] = info.producer_id

    # ---------------------------------------------------------------- transactions

    def check_end_txn_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """appendEndTxnMarker's checks; raises ProducerStateError when the marker is refused."""
        entry = self._producers.get(producer_id)
        if self.rules is Rules.LEGACY or entry is None:
            return
        check_producer_epoch(entry, epoch)
        if coordinator_epoch < entry.coordinator_epoch:
            raise ProducerStateError(
                ErrorCode.transaction_coordinator_fenced,
                f"marker of producer {producer_id} from coordinator epoch {coordinator_epoch} "
                f"< {entry.coordinator_epoch}",
            )

    def complete_txn(
        self,
        producer_id: int,
        epoch: int,
        coordinator_epoch: int,
        *,
        offset: int,
        timestamp: int,
        aborted: bool,
    ) -> CompletedTxn | None:
        """Record an appended marker at `offset` that ends the producer's transaction; returns
        the transaction it closed, if the producer had written here."""
        entry = self._producers.setdefault(producer_id, ProducerStateEntry(producer_id))
        first = entry.current_txn_first_offset
        entry.maybe_update_producer_epoch(epoch)
        entry.current_txn_first_offset = NO_OFFSET
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        if first == NO_OFFSET:
            return None
        self._ongoing.pop(first, None)
        return CompletedTxn(producer_id, first, offset, aborted)

    def has_ongoing_txn(self, producer_id: int) -> bool:
        entry = self._producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset != NO_OFFSET

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, if any."""
        return min(self._ongoing, default=None)

    def _forget(self, producer_id: int) -> None:
        entry = self._producers.pop(producer_id)
        self._ongoing.pop(entry.current_txn_first_offset, None)

    def is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        """isProducerExpired: idle long enough, and no transaction open."""
        return (
            entry.current_txn_first_offset == NO_OFFSET
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def remove_expired(
        self, now_ms: int, producer_id: int | None = None, force: bool = False
    ) -> int:
        """removeExpiredProducers, optionally for one producer id; `force` ignores idle time."""
        if producer_id is None:
            candidates = list(self._producers)
        else:
            candidates = [producer_id] if producer_id in self._producers else []
        expired = [
            pid for pid in candidates if force or self.is_expired(self._producers[pid], now_ms)
        ]
        for pid in expired:
            self._forget(pid)
        return len(expired)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> int:
        """Kafka 2.0's truncateHead drops producers whose last batch left the log; 3.9 keeps them."""
        if self.rules is not Rules.KAFKA_2_0:
            return 0
        gone = [
            pid
            for pid, entry in self._producers.items()
            if entry.last_data_offset < log_start_offset
        ]
        for pid in gone:
            self._forget(pid)
        return len(gone)

    def set_retained_batches(self, retained: int) -> None:
        check_retained_batches(retained)
        self.retained_batches = retained
        for entry in self._producers.values():
            entry.retain_last(retained)

    def load(
        self, entries: Iterable[ProducerStateEntry], now_ms: int, log_start_offset: int
    ) -> None:
        """Install snapshot entries (loadFromSnapshot): expired ones are skipped, and under 2.0
        also those whose last batch lies below the log start offset."""
        self._producers.clear()
        self._ongoing.clear()
        for entry in entries:
            if self.is_expired(entry, now_ms):
                continue
            if self.rules is Rules.KAFKA_2_0 and entry.last_data_offset < log_start_offset:
                continue
            entry.retain_last(self.retained_batches)
            self._producers[entry.producer_id] = entry
            if entry.current_txn_first_offset != NO_OFFSET:
                self._ongoing[entry.current_txn_first_offset] = entry.producer_id
