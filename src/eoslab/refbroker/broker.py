"""The broker's state behind the protocol server: storage, producer ids, groups, transactions,
faults, counters.

Everything here runs on the asyncio loop thread, so one request's storage calls never
interleave with another's: the loop order is the per-partition order.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from eoslab.clock import now_ms
from eoslab.control.fault_log import FaultLog
from eoslab.refbroker.config import AUTO_CREATE_PARTITIONS, BrokerConfig
from eoslab.refbroker.control_batch import EndTxnMarker
from eoslab.refbroker.counters import BrokerCounters
from eoslab.refbroker.faults import RequestFaults
from eoslab.refbroker.groups.committed_offsets import CommittedOffsetStore
from eoslab.refbroker.groups.group_coordinator import GroupCoordinator, UnavailableCoordinator
from eoslab.refbroker.internal_topics import GROUP_METADATA_TOPIC, INTERNAL_TOPIC_PARTITIONS
from eoslab.refbroker.log_manager import LogManager, UnknownTopicOrPartitionError
from eoslab.refbroker.pid_blocks import ProducerIdManager, producer_id_manager
from eoslab.refbroker.producer_state import Rules
from eoslab.refbroker.scheduler import LoopScheduler, Scheduler, Timer
from eoslab.refbroker.topic_names import topic_name_error
from eoslab.refbroker.transactions.transaction_coordinator import TransactionCoordinator
from eoslab.refbroker.transactions.transaction_state_manager import TransactionStateManager

log = logging.getLogger(__name__)


class AppendSignal:
    """Wakes long-polling fetches when any partition grows (Kafka's delayed-fetch purgatory)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout_s: float) -> None:
        """Return on the next append or after `timeout_s`, whichever comes first."""
        try:
            await asyncio.wait_for(self._event.wait(), timeout_s)
        except TimeoutError:
            return


class ReferenceBroker:
    """Owns the LogManager, the ProducerIdManager, the GroupCoordinator and the
    TransactionCoordinator, and can lose them like a crashed process."""

    def __init__(self, config: BrokerConfig, scheduler: Scheduler | None = None) -> None:
        self.config = config
        self.scheduler = scheduler or LoopScheduler()
        self.counters = BrokerCounters()
        self.request_faults = RequestFaults()
        self.fault_log = FaultLog(config.fault_log_path)
        self.appends = AppendSignal()
        self.unavailable_coordinator = UnavailableCoordinator()
        self.storage, self.producer_ids = self._open()
        self.groups = self._open_groups()
        self.transactions = self._open_transactions()
        self._expiry: Timer | None = None
        self._schedule_producer_expiry()

    def _schedule_producer_expiry(self) -> None:
        interval_s = self.config.producer_id_expiration_check_interval_ms / 1000
        self._expiry = self.scheduler.call_later(interval_s, self._on_producer_expiry)

    def _on_producer_expiry(self) -> None:
        """Kafka's PeriodicProducerExpirationCheck: idle producers leave every partition."""
        removed = self.storage.expire_producers(now_ms())
        if removed:
            log.info("expired %d idle producer state entries", removed)
        self._schedule_producer_expiry()

    def _open(self) -> tuple[LogManager, ProducerIdManager]:
        self.config.log_dir.mkdir(parents=True, exist_ok=True)
        self.config.pid_block_dir.mkdir(parents=True, exist_ok=True)
        storage = LogManager(self.config.storage())
        ids = producer_id_manager(
            self.config.zookeeper, self.config.pid_block_dir, broker_id=self.config.node_id
        )
        return storage, ids

    def _open_groups(self) -> GroupCoordinator:
        """The coordinator with the offsets and group metadata recovered from disk."""
        store = CommittedOffsetStore(self.config.group_dir, sync=self.config.fsync == "every-batch")
        return GroupCoordinator(
            store,
            self.config.group_config(),
            unavailable=self.unavailable_coordinator,
            events=self.counters.group_events,
        )

    def _open_transactions(self) -> TransactionCoordinator:
        """The coordinator with the transaction state recovered from disk; transactions that
        were ending get their markers again."""
        state = TransactionStateManager(
            self.config.transaction_dir, sync=self.config.fsync == "every-batch"
        )
        coordinator = TransactionCoordinator(
            state, self.producer_ids, self, self.config.transaction_config()
        )
        coordinator.abort_timed_out_transactions()
        return coordinator

    def write_txn_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        marker: EndTxnMarker,
        partitions: Iterable[tuple[str, int]],
    ) -> bool:
        """The transaction coordinator's WriteTxnMarkers: the marker into each partition (a
        group's offsets partition: the group coordinator ends the producer's pending offsets)."""
        written = True
        for topic, partition in partitions:
            if topic == GROUP_METADATA_TOPIC:
                written &= self.groups.complete_transaction(producer_id, partition, marker.commit)
                continue
            try:
                plog = self.storage.partition(topic, partition)
            except UnknownTopicOrPartitionError:
                log.warning("no marker for %s-%d: the partition is gone", topic, partition)
                continue
            result = plog.append_end_txn_marker(producer_id, producer_epoch, marker, now_ms())
            if result.error is not ErrorCode.none:
                log.warning("marker for %s-%d: %s", topic, partition, result.error_message)
                written &= result.error is not ErrorCode.kafka_storage_error
        self.appends.notify()
        return written

    def crash_restart(self) -> dict[str, int]:
        """Forget everything in memory and recover from disk, without a clean close; what the
        recovered storage holds (:meth:`LogManager.held`).

        Nothing is flushed or snapshotted first: what survives is what the storage layer
        had already written, exactly as after kill -9 (the server drops the connections).
        """
        self.producer_ids.close()  # a dead process's ZooKeeper session ends too
        self.groups.shutdown()  # its timers die with the process
        self.transactions.shutdown()
        del self.storage, self.producer_ids, self.groups, self.transactions
        gc.collect()  # closes the abandoned file handles before the log is reopened
        self.storage, self.producer_ids = self._open()
        self.groups = self._open_groups()
        self.transactions = self._open_transactions()
        log.warning("crash-restart: storage, groups and transactions recovered from disk")
        return self.storage.held()

    def maybe_auto_create(self, topic: str) -> bool:
        """Create an unknown, legal topic when --auto-create-topics is on (Kafka's option); an
        internal topic gets its own partitions, as Kafka's AutoTopicCreationManager gives it."""
        if (
            not self.config.auto_create_topics
            or topic in self.storage.topics()
            or topic_name_error(topic) is not None
        ):
            return False
        partitions = INTERNAL_TOPIC_PARTITIONS.get(topic, AUTO_CREATE_PARTITIONS)
        self.storage.create_topic(topic, partitions)
        log.info("auto-created topic %s with %d partition(s)", topic, partitions)
        return True

    def set_rules(self, rules: Rules | None) -> Rules:
        """Judge batches by ``rules`` from now on (None: the configured ones)."""
        self.storage.rules = rules or self.config.rules
        return self.storage.rules

    def clear_faults(self) -> None:
        """Back to the configured broker: request faults disarmed, the configured rules and
        duplicate-cache size (whatever `--retained-batches` said) restored."""
        self.request_faults.clear()
        self.unavailable_coordinator.clear()
        self.set_rules(None)
        self.storage.set_retained_batches(self.config.retained_batches)

    def close(self) -> None:
        """Graceful shutdown: the storage layer flushes and writes its snapshots."""
        if self._expiry is not None:
            self._expiry.cancel()
        self.storage.close()
        self.producer_ids.close()
        self.groups.shutdown()
        self.groups.store.close()
        self.transactions.shutdown()
        self.transactions.state.close()
        self.fault_log.close()
