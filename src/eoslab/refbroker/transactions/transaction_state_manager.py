"""Transaction state on disk: the reference broker's __transaction_state (Kafka's
TransactionStateManager).

Kafka appends each transition of a transactional id as a record to the compacted
__transaction_state topic and replays it into its cache when it becomes coordinator. Here one
record file (record_file.py) does the same:

    <data_dir>/transactions/transaction-state.log

A record is one transactional id's metadata after a transition (UTF-8 JSON), stored before the
transition is answered or acted on (fsynced under `--fsync every-batch`, so it survives kill -9).
Recovery replays the records, the last one of each id winning, and cuts a torn or corrupt tail;
compaction rewrites the file with one record per id once it holds more than twice as many
records as ids, and at least COMPACT_MIN_RECORDS.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from eoslab.refbroker.record_file import CorruptRecordError, RecordFile
from eoslab.refbroker.transactions.transaction_metadata import (
    TransactionMetadata,
    TransactionState,
)

FILE_NAME = "transaction-state.log"
COMPACT_MIN_RECORDS = 10_000


class TransactionStateManager:
    """Transactional id -> its TransactionMetadata, durable."""

    def __init__(self, directory: Path, *, sync: bool) -> None:
        self.path = directory / FILE_NAME
        self._transactions: dict[str, TransactionMetadata] = {}
        self._records_in_file = 0
        self._file = RecordFile(self.path, sync=sync, apply=self._replay)
        self.recovered_bytes_truncated = self._file.recovered_bytes_truncated

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self._transactions.get(transactional_id)

    def all(self) -> list[TransactionMetadata]:
        return list(self._transactions.values())

    def put(self, metadata: TransactionMetadata) -> None:
        """Store the transition durably, then make it the id's state; raises OSError with the
        previous state kept."""
        self._file.append(_dump(metadata))
        self._transactions[metadata.transactional_id] = metadata
        self._records_in_file += 1
        if self._records_in_file >= max(COMPACT_MIN_RECORDS, 2 * len(self._transactions)):
            self._file.rewrite(_dump(m) for m in self._transactions.values())
            self._records_in_file = len(self._transactions)

    def list(
        self, states: Iterable[str], producer_ids: Iterable[int], min_duration_ms: int, now: int
    ) -> tuple[list[str], list[TransactionMetadata]]:
        """listTransactionStates: (state filters that name no state, the matching ids)."""
        names = set(states)
        known = {s.value for s in TransactionState}
        pids = set(producer_ids)
        matching = [
            m
            for m in self._transactions.values()
            if (not names or m.state.value in names)
            and (not pids or m.producer_id in pids)
            and (min_duration_ms < 0 or now - m.txn_start_ms > min_duration_ms)
        ]
        return sorted(names - known), matching

    def close(self) -> None:
        self._file.close()

    def _replay(self, payload: bytes) -> None:
        metadata = _load(payload)
        self._transactions[metadata.transactional_id] = metadata
        self._records_in_file += 1


def _dump(metadata: TransactionMetadata) -> bytes:
    value: dict[str, Any] = asdict(metadata)
    value["partitions"] = sorted(metadata.partitions)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _load(payload: bytes) -> TransactionMetadata:
    try:
        value = json.loads(payload)
        value["state"] = TransactionState(value["state"])
        value["partitions"] = frozenset((str(t), int(p)) for t, p in value["partitions"])
        return TransactionMetadata(**value)
    except (ValueError, KeyError, TypeError) as bad:
        raise CorruptRecordError(str(bad)) from None
