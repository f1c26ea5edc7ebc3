"""The transaction coordinator: Kafka 3.9's TransactionCoordinator for the single reference broker.

Rules are Kafka's (core/.../coordinator/transaction/TransactionCoordinator.scala), method by
method: InitProducerId with a transactional id (a new id gets a producer id at epoch 0; a
completed or empty one bumps its epoch, a retry of the bump gets the same answer (KIP-360), an
exhausted epoch rotates the producer id; an open transaction is fenced: aborted at the bumped
epoch, the client told CONCURRENT_TRANSACTIONS, and its retry bumps once more), AddPartitionsToTxn
and AddOffsetsToTxn (the group's __consumer_offsets partition joins the transaction), EndTxn
(PrepareCommit/PrepareAbort stored, a marker written into every partition of the transaction, the
transaction complete), the verification a partition leader asks for before a transaction's first
write to it (KIP-890 part 1, handleVerifyPartitionsInTransaction), DescribeTransactions,
ListTransactions, and the periodic abort of transactions open longer than their timeout, at a
bumped epoch so that the late producer is fenced.

Every transition is stored by TransactionStateManager (transaction_state_manager.py) before it is
answered or acted on. A restarted coordinator completes every transaction it finds in
PrepareCommit or PrepareAbort (it writes the markers again, as Kafka's loading does), and aborts
open ones when their timeout passes.

How it differs from Kafka 3.9's coordinator:
    1. One broker coordinates every transactional id: FindCoordinator always names this broker;
       the __transaction_state topic is made by the first FindCoordinator for a transactional
       id, as in Kafka, but stays empty (internal_topics.py: the state is kept in
       transaction_state_manager.py's file); there is no loading phase and no coordinator
       movement (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR after a move,
       COORDINATOR_NOT_AVAILABLE are never answered: the first FindCoordinator is answered once
       the topic is made; a failed write to disk answers NOT_COORDINATOR, as Kafka maps
       KAFKA_STORAGE_ERROR). The coordinator epoch in markers is always 0.
    2. Markers are written synchronously, in the EndTxn request: Kafka answers EndTxn once
       PrepareCommit/PrepareAbort is in its log and sends the markers afterwards, so a client that
       starts its next transaction at once can get CONCURRENT_TRANSACTIONS there, and the LSO
       moves a little after the answer; here both are done when EndTxn is answered. A marker that
       cannot be written (a disk error) leaves the transaction in PrepareCommit/PrepareAbort, and
       the periodic task writes it again, as Kafka retries its markers.
    3. The fence of InitProducerId and the abort of a timed-out transaction are written directly
       at the bumped epoch: Kafka's pending PrepareEpochFence state never reaches its log and is
       not observable (DescribeTransactions shows Ongoing until the abort is prepared there too).
    4. Transactional ids never expire (transactional.id.expiration.ms, 7 days in Kafka).
    5. No WriteTxnMarkers API (broker to broker), no AddPartitionsToTxn v4-5 (batched and
       verify-only, broker to broker): the verification is a call inside the broker.
    6. Transaction version 2 (KIP-890 part 2: an epoch bump per transaction, partitions added
       implicitly by Produce, EndTxn v5, InitProducerId v6 keepPreparedTxn) is not implemented:
       the broker advertises no `transaction.version` feature, so Kafka 4 clients use version 1
       with it, as with a Kafka 3.9 broker (the Java client 4.4 does: AddPartitionsToTxn, EndTxn
       v4; tests/refbroker/test_txn_java_client_4.py).
    7. No authorizer: never TRANSACTIONAL_ID_AUTHORIZATION_FAILED; no quotas.
    8. A marker for a partition that no longer exists (topic deleted) is skipped; a marker a
       partition refuses (a newer epoch already there) is logged and skipped, where Kafka stops
       sending that transaction's markers and leaves it pending.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from eoslab.clock import now_ms
from eoslab.refbroker.control_batch import EndTxnMarker
from eoslab.refbroker.scheduler import LoopScheduler, Scheduler, Timer
from eoslab.refbroker.transactions.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    EpochFencedError,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    is_epoch_exhausted,
)
from eoslab.refbroker.transactions.transaction_state_manager import TransactionStateManager

log = logging.getLogger(__name__)

E = ErrorCode
COORDINATOR_EPOCH = 0
DEFAULT_MAX_TIMEOUT_MS = 900_000
"""transaction.max.timeout.ms"""
DEFAULT_ABORT_INTERVAL_MS = 10_000
"""transaction.abort.timed.out.transaction.cleanup.interval.ms"""


@dataclass(frozen=True)
class TransactionConfig:
    max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS
    abort_timed_out_transaction_cleanup_interval_ms: int = DEFAULT_ABORT_INTERVAL_MS


class ProducerIdGenerator(Protocol):
    def generate_producer_id(self) -> int: ...


class MarkerWriter(Protocol):
    def write_txn_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        marker: EndTxnMarker,
        partitions: Iterable[TopicPartition],
    ) -> bool:
        """Write the marker into every partition; False when one could not be written."""


@dataclass(frozen=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class TransactionCoordinator:
    def __init__(
        self,
        state: TransactionStateManager,
        producer_ids: ProducerIdGenerator,
        markers: MarkerWriter,
        config: TransactionConfig | None = None,
        *,
        scheduler: Scheduler | None = None,
    ) -> None:
        self.state = state
        self.producer_ids = producer_ids
        self.markers = markers
        self.config = config or TransactionConfig()
        self.scheduler = scheduler or LoopScheduler()
        self._timer: Timer | None = None
        self._schedule_tick()

    def shutdown(self) -> None:
        """Stop the periodic task: a crashed or stopped coordinator must not act any more."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ---------------------------------------------------------------- InitProducerId

    def handle_init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None
    ) -> InitProducerIdResult:
        """`expected`: the (producer id, epoch) InitProducerId v3+ says the producer had."""
        if not transactional_id:
            return InitProducerIdResult(E.invalid_request)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return InitProducerIdResult(E.invalid_transaction_timeout)
        now = now_ms()
        metadata = self.state.get(transactional_id) or TransactionMetadata.new(
            transactional_id, self.producer_ids.generate_producer_id(), timeout_ms, now
        )
        if expected is not None and not metadata.is_valid_producer_id(*expected):
            return InitProducerIdResult(E.producer_fenced)
        if metadata.state.is_prepare:
            return InitProducerIdResult(E.concurrent_transactions)
        if metadata.state is TransactionState.ONGOING:
            # abort the open transaction at a bumped epoch; the client retries and bumps again
            error = self._end_transaction(metadata, metadata.prepare_fence(), commit=False)
            return InitProducerIdResult(E.concurrent_transactions if error is E.none else error)
        expected_epoch = None if expected is None else expected[1]
        try:
            if is_epoch_exhausted(metadata.producer_epoch) and expected_epoch in (
                None,
                metadata.producer_epoch,
            ):
                new_id = self.producer_ids.generate_producer_id()
                bumped = metadata.prepare_producer_id_rotation(
                    new_id, timeout_ms, now, record_last_epoch=expected is not None
                )
            else:
                bumped = metadata.prepare_increment_producer_epoch(timeout_ms, expected_epoch, now)
        except EpochFencedError:
            return InitProducerIdResult(E.producer_fenced)
        if (error := self._store(bumped)) is not E.none:
            return InitProducerIdResult(error)
        log.info(
            "initialized transactional id %s: producer %d epoch %d",
            transactional_id,
            bumped.producer_id,
            bumped.producer_epoch,
        )
        return InitProducerIdResult(E.none, bumped.producer_id, bumped.producer_epoch)

    # ---------------------------------------------------------------- AddPartitionsToTxn

    def handle_add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> ErrorCode:
        """AddPartitionsToTxn and AddOffsetsToTxn (with the group's offsets partition)."""
        added = frozenset(partitions)
        metadata, error = self._current(transactional_id, producer_id)
        if metadata is None:
            return error
        if producer_epoch != metadata.producer_epoch:
            return E.producer_fenced
        if metadata.state.is_prepare:
            return E.concurrent_transactions
        if metadata.state is TransactionState.ONGOING and added <= metadata.partitions:
            return E.none
        return self._store(metadata.prepare_add_partitions(added, now_ms()))

    def handle_verify_partition(
        self,
        transactional_id: str | None,
        producer_id: int,
        producer_epoch: int,
        partition: TopicPartition,
        *,
        abortable: bool,
    ) -> ErrorCode:
        """KIP-890 part 1: may this producer write its transaction into `partition`? The error
        as the partition leader answers it (AddPartitionsToTxnManager's mapping); `abortable`:
        the request's version knows TRANSACTION_ABORTABLE (Produce v11, TxnOffsetCommit v4:
        Kafka's TransactionSupportedOperation genericError), else INVALID_TXN_STATE."""
        metadata, error = self._current(transactional_id or "", producer_id)
        if metadata is not None:
            if producer_epoch != metadata.producer_epoch:
                error = E.producer_fenced
            elif metadata.state.is_prepare:
                error = E.concurrent_transactions
            elif partition not in metadata.partitions:
                error = E.transaction_abortable
            else:
                error = E.none
        if error is E.producer_fenced:
            return E.invalid_producer_epoch
        if error is E.transaction_abortable and not abortable:
            return E.invalid_txn_state
        return error

    # ---------------------------------------------------------------- EndTxn

    def handle_end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        metadata, error = self._current(transactional_id, producer_id)
        if metadata is None:
            return error
        if producer_epoch != metadata.producer_epoch:
            return E.producer_fenced
        match metadata.state:
            case TransactionState.ONGOING:
                return self._end_transaction(metadata, producer_epoch, commit)
            case TransactionState.COMPLETE_COMMIT | TransactionState.COMPLETE_ABORT:
                done = metadata.state is TransactionState.COMPLETE_COMMIT
                return E.none if done == commit else E.invalid_txn_state
            case TransactionState.PREPARE_COMMIT | TransactionState.PREPARE_ABORT:
                preparing = metadata.state is TransactionState.PREPARE_COMMIT
                return E.concurrent_transactions if preparing == commit else E.invalid_txn_state
            case _:
                return E.invalid_txn_state

    def _end_transaction(
        self, metadata: TransactionMetadata, epoch: int, commit: bool
    ) -> ErrorCode:
        """Ongoing -> Prepare*, markers, Complete*: the answer is NONE once Prepare* is stored."""
        prepared = metadata.prepare_abort_or_commit(commit, epoch, now_ms())
        if (error := self._store(prepared)) is not E.none:
            return error
        self._complete(prepared)
        return E.none

    def _complete(self, prepared: TransactionMetadata) -> None:
        marker = EndTxnMarker(prepared.state is TransactionState.PREPARE_COMMIT, COORDINATOR_EPOCH)
        written = self.markers.write_txn_markers(
            prepared.producer_id, prepared.producer_epoch, marker, sorted(prepared.partitions)
        )
        if not written:
            log.warning("markers of %s not all written; retrying later", prepared.transactional_id)
            return
        self._store(prepared.prepare_complete(now_ms()))

    # ---------------------------------------------------------------- admin

    def handle_describe(
        self, transactional_id: str
    ) -> tuple[ErrorCode, TransactionMetadata | None]:
        if not transactional_id:
            return E.invalid_request, None
        metadata = self.state.get(transactional_id)
        return (E.transactional_id_not_found if metadata is None else E.none), metadata

    def handle_list(
        self, states: Iterable[str], producer_ids: Iterable[int], min_duration_ms: int
    ) -> tuple[list[str], list[TransactionMetadata]]:
        return self.state.list(states, producer_ids, min_duration_ms, now_ms())

    # ---------------------------------------------------------------- periodic

    def abort_timed_out_transactions(self) -> list[str]:
        """abortTimedOutTransactions, with the unfinished markers of Prepare* transactions
        written again; returns the ids aborted now."""
        now = now_ms()
        aborted = []
        for metadata in self.state.all():
            if metadata.state.is_prepare:
                self._complete(metadata)
            elif metadata.timed_out(now):
                log.info(
                    "aborting transaction %s: open past its timeout", metadata.transactional_id
                )
                self._end_transaction(metadata, metadata.prepare_fence(), commit=False)
                aborted.append(metadata.transactional_id)
        return aborted

    def _schedule_tick(self) -> None:
        interval = self.config.abort_timed_out_transaction_cleanup_interval_ms / 1000
        self._timer = self.scheduler.call_later(interval, self._on_tick)

    def _on_tick(self) -> None:
        self.abort_timed_out_transactions()
        self._schedule_tick()

    # ---------------------------------------------------------------- helpers

    def _current(
        self, transactional_id: str, producer_id: int
    ) -> tuple[TransactionMetadata | None, ErrorCode]:
        """The id's metadata if the producer id is its current one, else the error."""
        if not transactional_id:
            return None, E.invalid_request
        metadata = self.state.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            return None, E.invalid_producer_id_mapping
        return metadata, E.none

    def _store(self, metadata: TransactionMetadata) -> ErrorCode:
        try:
            self.state.put(metadata)
        except OSError as failure:
            log.error("transaction state of %s not stored: %s", metadata.transactional_id, failure)
            return E.not_coordinator  # Kafka: KAFKA_STORAGE_ERROR -> NOT_COORDINATOR
        return E.none
