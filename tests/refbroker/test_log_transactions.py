"""Transactions in the partition log on a real file system: open transactions hold the last
stable offset, markers end them, aborted ones are indexed for read_committed fetches, and all of
it survives a clean restart and a crash (the log reopened without a close)."""

from __future__ import annotations

import gc
import time
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from record_batches import make_batch

from eoslab.refbroker import txn_index
from eoslab.refbroker.batch_header import BatchHeader
from eoslab.refbroker.control_batch import EndTxnMarker
from eoslab.refbroker.log_manager import LogManager, PartitionLog, StorageConfig
from eoslab.refbroker.txn_index import AbortedTxn

A, B = 1_000_000_001, 1_000_000_002
NOW = int(time.time() * 1000)
COMMIT, ABORT = EndTxnMarker(True, 0), EndTxnMarker(False, 0)


class Partition:
    """Partition t-0 of a LogManager that can be closed, or abandoned as by kill -9."""

    def __init__(self, directory: Path, segment_bytes: int = 64 * 1024 * 1024) -> None:
        self.directory = directory
        self.manager = LogManager(StorageConfig(directory, segment_bytes=segment_bytes))
        if "t" not in self.manager.topics():
            self.manager.create_topic("t", 1)

    @property
    def log(self) -> PartitionLog:
        return self.manager.partition("t", 0)

    def write(self, pid: int, seq: int, count: int = 2, epoch: int = 0, txn: bool = True) -> int:
        batch = make_batch(pid, epoch, seq, count, timestamp_ms=NOW, transactional=txn)
        result = self.log.append(batch, NOW)
        assert result.error is ErrorCode.none, result
        return result.base_offset

    def end(self, pid: int, marker: EndTxnMarker, epoch: int = 0) -> ErrorCode:
        return self.log.append_end_txn_marker(pid, epoch, marker, NOW).error

    def reopened(self, *, crash: bool) -> Partition:
        if crash:
            del self.manager
            gc.collect()
        else:
            self.manager.close()
        return Partition(self.directory)


def offsets_of(data: bytes) -> list[tuple[int, bool]]:
    """(base offset, is a control batch) of each batch read."""
    found, position = [], 0
    while position < len(data):
        header = BatchHeader.parse(data, position)
        found.append((header.base_offset, header.is_control))
        position += header.size
    return found


@pytest.fixture
def partition(tmp_path: Path) -> Partition:
    return Partition(tmp_path / "data")


def test_an_open_transaction_holds_the_last_stable_offset(partition: Partition) -> None:
    partition.write(A, 0)  # offsets 0-1, open
    partition.write(B, 0, txn=False)  # 2-3, plain
    assert (partition.log.last_stable_offset, partition.log.log_end_offset) == (0, 4)
    assert partition.log.read_committed(0, 1 << 20) == (b"", [])
    assert partition.log.list_offset(-1, read_committed=True) == (0, -1)
    assert partition.end(A, COMMIT) is ErrorCode.none  # marker at 4
    assert partition.log.last_stable_offset == 5
    data, aborted = partition.log.read_committed(0, 1 << 20)
    assert offsets_of(data) == [(0, False), (2, False), (4, True)]
    assert aborted == []


def test_aborted_transactions_are_returned_to_read_committed_fetches(partition: Partition) -> None:
    partition.write(A, 0)  # 0-1
    partition.write(B, 0)  # 2-3, another open transaction
    partition.end(A, ABORT)  # marker 4: B still holds the LSO at 2
    assert partition.log.last_stable_offset == 2
    data, aborted = partition.log.read_committed(0, 1 << 20)
    assert offsets_of(data) == [(0, False)]
    assert aborted == [AbortedTxn(A, 0, 4, 2)]
    partition.end(B, COMMIT)  # marker 5
    assert partition.log.read_committed(0, 1 << 20)[1] == [AbortedTxn(A, 0, 4, 2)]
    assert partition.log.read_committed(5, 1 << 20)[1] == []  # past the abort's marker
    assert partition.log.active_producers()[0].current_txn_start_offset == -1


def test_producer_rules_of_transactions(partition: Partition) -> None:
    partition.write(A, 0)
    plain = partition.log.append(make_batch(A, 0, 2, 1, timestamp_ms=NOW), NOW)
    assert plain.error is ErrorCode.invalid_txn_state  # the transaction is open
    assert partition.log.active_producers()[0].current_txn_start_offset == 0
    assert partition.end(A, ABORT, epoch=1) is ErrorCode.none  # a fence: the epoch goes up
    late = partition.log.append(make_batch(A, 0, 2, 1, timestamp_ms=NOW, transactional=True), NOW)
    assert late.error is ErrorCode.invalid_producer_epoch
    assert partition.end(A, COMMIT, epoch=0) is ErrorCode.invalid_producer_epoch
    assert partition.write(A, 0, epoch=2) == 3  # the new epoch starts at sequence 0


@pytest.mark.parametrize("crash", [False, True])
def test_open_and_aborted_transactions_survive_a_restart(partition: Partition, crash: bool) -> None:
    partition.write(A, 0)  # 0-1, aborted below
    partition.write(B, 0)  # 2-3, left open
    partition.end(A, ABORT)  # 4
    again = partition.reopened(crash=crash)
    assert again.log.last_stable_offset == 2
    assert again.log.read_committed(0, 1 << 20)[1] == [AbortedTxn(A, 0, 4, 2)]
    again.end(B, COMMIT)
    assert again.log.last_stable_offset == 6


def test_an_index_entry_lost_in_a_crash_is_rebuilt_from_the_log(partition: Partition) -> None:
    """A kill -9 between the ABORT marker's append and its index entry: the log replay after
    the producer-state snapshot finds the marker and indexes it again."""
    partition.write(A, 0)
    partition.end(A, ABORT)
    index = partition.directory / "t-0" / txn_index.FILE_NAME
    index.write_bytes(b"")
    again = partition.reopened(crash=True)
    assert again.log.read_committed(0, 1 << 20)[1] == [AbortedTxn(A, 0, 2, 3)]
    assert len(index.read_bytes()) == txn_index.ENTRY.size


def test_a_read_across_segments_gets_the_aborted_transactions_of_both(tmp_path: Path) -> None:
    """Each batch rolls a segment here: a read from 0 returns batches of several segments, and
    the aborted list covers all of them (Kafka's read stops at the first segment's end)."""
    partition = Partition(tmp_path / "small", segment_bytes=100)
    partition.write(A, 0)  # 0-1
    partition.end(A, COMMIT)  # 2
    partition.write(B, 0)  # 3-4
    partition.end(B, ABORT)  # 5
    data, aborted = partition.log.read_committed(0, 1 << 20)
    assert offsets_of(data) == [(0, False), (2, True), (3, False), (5, True)]
    assert aborted == [AbortedTxn(B, 3, 5, 6)]
