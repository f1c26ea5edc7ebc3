"""The reference broker's settings: one frozen value built by `serve` and read everywhere."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from eoslab.refbroker.groups.group_coordinator import GroupConfig
from eoslab.refbroker.log_manager import StorageConfig
from eoslab.refbroker.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    DEFAULT_RETAINED_BATCHES,
    Rules,
)
from eoslab.refbroker.topic_configs import DEFAULT_MESSAGE_MAX_BYTES
from eoslab.refbroker.transactions.transaction_coordinator import (
    DEFAULT_ABORT_INTERVAL_MS,
    DEFAULT_MAX_TIMEOUT_MS,
    TransactionConfig,
)
from eoslab.settings import HostPort

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
"""Kafka's socket.request.max.bytes default: larger size prefixes close the connection."""

AUTO_CREATE_PARTITIONS = 1
"""Kafka's num.partitions default, used for topics created by Metadata/Produce."""


@dataclass(frozen=True)
class BrokerConfig:
    listen: HostPort
    advertised: HostPort
    control: HostPort
    data_dir: Path
    node_id: int = 1
    cluster_id: str = "eoslab-refbroker"
    zookeeper: str | None = None
    rules: Rules = Rules.KAFKA_3_9
    fsync: Literal["every-batch", "os"] = "every-batch"
    retained_batches: int = DEFAULT_RETAINED_BATCHES
    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    producer_id_expiration_check_interval_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS
    auto_create_topics: bool = False
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    message_max_bytes: int = DEFAULT_MESSAGE_MAX_BYTES
    """The largest batch of a topic without max.message.bytes, and of a group's record."""
    fault_log: Path | None = None
    group_initial_rebalance_delay_ms: int = GroupConfig.initial_rebalance_delay_ms
    group_min_session_timeout_ms: int = GroupConfig.min_session_timeout_ms
    group_max_session_timeout_ms: int = GroupConfig.max_session_timeout_ms
    transaction_max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = DEFAULT_ABORT_INTERVAL_MS

    @property
    def log_dir(self) -> Path:
        """Partition logs live one level down so nothing else under data_dir looks like one."""
        return self.data_dir / "logs"

    @property
    def pid_block_dir(self) -> Path:
        return self.data_dir / "pid-blocks"

    @property
    def group_dir(self) -> Path:
        """Committed offsets and group metadata (the broker's __consumer_offsets)."""
        return self.data_dir / "groups"

    @property
    def transaction_dir(self) -> Path:
        """Transaction state (the broker's __transaction_state)."""
        return self.data_dir / "transactions"

    def transaction_config(self) -> TransactionConfig:
        return TransactionConfig(
            max_timeout_ms=self.transaction_max_timeout_ms,
            abort_timed_out_transaction_cleanup_interval_ms=(
                self.transaction_abort_timed_out_transaction_cleanup_interval_ms
            ),
        )

    def group_config(self) -> GroupConfig:
        return GroupConfig(
            min_session_timeout_ms=self.group_min_session_timeout_ms,
            max_session_timeout_ms=self.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=self.group_initial_rebalance_delay_ms,
            max_record_bytes=self.message_max_bytes,
        )

    @property
    def fault_log_path(self) -> Path:
        return self.fault_log or self.data_dir / "faults.jsonl"

    def storage(self) -> StorageConfig:
        return StorageConfig(
            data_dir=self.log_dir,
            fsync=self.fsync,
            rules=self.rules,
            retained_batches=self.retained_batches,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
            max_batch_bytes=self.message_max_bytes,
        )
