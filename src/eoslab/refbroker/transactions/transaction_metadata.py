"""One transactional id's state and its transitions: Kafka's TransactionMetadata, pure.

Kafka 3.9 (core/.../coordinator/transaction/TransactionMetadata.scala) prepares each transition
as a TxnTransitMetadata, appends it to __transaction_state and only then applies it. Here a
transition returns the next TransactionMetadata (frozen); the coordinator stores it durably and
then keeps it. The states and the legal moves between them are Kafka's:

    Empty -> Ongoing (AddPartitionsToTxn / AddOffsetsToTxn) -> PrepareCommit | PrepareAbort
    (EndTxn, a fence, a timeout) -> CompleteCommit | CompleteAbort (every marker written)
    -> Ongoing (the next transaction) or Empty (InitProducerId bumps the epoch)

PrepareEpochFence, Kafka's pending state between a fence and its abort, never reaches the log
and has no counterpart here: the fence is the abort at the bumped epoch (prepare_fence).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_TIMESTAMP = -1
MAX_EPOCH = 2**15 - 1
"""Short.MaxValue."""

TopicPartition = tuple[str, int]


class TransactionState(enum.StrEnum):
    """The names Kafka's DescribeTransactions and ListTransactions use."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"

    @property
    def is_prepare(self) -> bool:
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)

    @property
    def is_complete_or_empty(self) -> bool:
        return self in (
            TransactionState.EMPTY,
            TransactionState.COMPLETE_COMMIT,
            TransactionState.COMPLETE_ABORT,
        )


class EpochFencedError(Exception):
    """PRODUCER_FENCED: the request's epoch is neither the current nor the last one."""


def is_epoch_exhausted(epoch: int) -> bool:
    """TransactionMetadata.isEpochExhausted: one epoch must stay for the fence of an abort."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    """The epoch before the last bump by InitProducerId, to answer its retry (KIP-360)."""
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    txn_start_ms: int
    last_update_ms: int

    @classmethod
    def new(
        cls, transactional_id: str, producer_id: int, timeout_ms: int, now: int
    ) -> TransactionMetadata:
        """The metadata of an unknown transactional id, before its first InitProducerId."""
        return cls(
            transactional_id,
            producer_id,
            NO_PRODUCER_ID,
            NO_PRODUCER_EPOCH,
            NO_PRODUCER_EPOCH,
            timeout_ms,
            TransactionState.EMPTY,
            frozenset(),
            NO_TIMESTAMP,
            now,
        )

    def is_valid_producer_id(self, producer_id: int, epoch: int) -> bool:
        """InitProducerId v3+ names the producer it was: fence it unless the metadata was just
        created, it is the current producer id, or the last one whose epoch ran out (a retry of
        a rotation whose answer was lost)."""
        return (
            self.producer_epoch == NO_PRODUCER_EPOCH
            or producer_id == self.producer_id
            or (producer_id == self.last_producer_id and is_epoch_exhausted(epoch))
        )

    def prepare_increment_producer_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now: int
    ) -> TransactionMetadata:
        """InitProducerId on a completed (or empty) transactional id: the next epoch, or the
        current one again for a retry of the last bump; raises EpochFencedError."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch in (NO_PRODUCER_EPOCH, expected_epoch):
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            raise EpochFencedError(
                f"epoch {expected_epoch} is neither {self.producer_epoch} nor the last one"
            )
        return self._empty(
            (self.producer_id, self.last_producer_id), (epoch, last_epoch), timeout_ms, now
        )

    def prepare_producer_id_rotation(
        self, producer_id: int, timeout_ms: int, now: int, record_last_epoch: bool
    ) -> TransactionMetadata:
        """The epoch ran out: a new producer id at epoch 0."""
        last_epoch = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._empty((producer_id, self.producer_id), (0, last_epoch), timeout_ms, now)

    def _empty(
        self, producer_ids: tuple[int, int], epochs: tuple[int, int], timeout_ms: int, now: int
    ) -> TransactionMetadata:
        """Empty with (producer id, last producer id) and (epoch, last epoch)."""
        (producer_id, last_producer_id), (epoch, last_epoch) = producer_ids, epochs
        return replace(
            self,
            producer_id=producer_id,
            last_producer_id=last_producer_id,
            producer_epoch=epoch,
            last_producer_epoch=last_epoch,
            timeout_ms=timeout_ms,
            state=TransactionState.EMPTY,
            partitions=frozenset(),
            txn_start_ms=NO_TIMESTAMP,
            last_update_ms=now,
        )

    def prepare_add_partitions(
        self, partitions: frozenset[TopicPartition], now: int
    ) -> TransactionMetadata:
        """The partitions join the transaction, which starts now unless it is already open."""
        opening = self.state.is_complete_or_empty
        return replace(
            self,
            state=TransactionState.ONGOING,
            partitions=partitions if opening else self.partitions | partitions,
            txn_start_ms=now if opening else self.txn_start_ms,
            last_update_ms=now,
        )

    def prepare_fence(self) -> int:
        """prepareFenceProducerEpoch: the epoch the abort of a fenced or timed-out transaction
        is written with (the producer's next request at the old epoch is then fenced)."""
        return min(self.producer_epoch + 1, MAX_EPOCH)

    def prepare_abort_or_commit(self, commit: bool, epoch: int, now: int) -> TransactionMetadata:
        """Ongoing -> PrepareCommit | PrepareAbort; a fence's abort carries the bumped epoch (and
        forgets the last epoch, which no retry may claim any more)."""
        fenced = epoch != self.producer_epoch
        return replace(
            self,
            state=TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT,
            producer_epoch=epoch,
            last_producer_epoch=NO_PRODUCER_EPOCH if fenced else self.last_producer_epoch,
            last_update_ms=now,
        )

    def prepare_complete(self, now: int) -> TransactionMetadata:
        """Every marker is written: the transaction is complete, its partitions released."""
        commit = self.state is TransactionState.PREPARE_COMMIT
        return replace(
            self,
            state=TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT,
            partitions=frozenset(),
            last_update_ms=now,
        )

    def timed_out(self, now: int) -> bool:
        """TransactionStateManager.timedOutTransactions: open longer than its timeout."""
        return self.state is TransactionState.ONGOING and self.txn_start_ms + self.timeout_ms < now
