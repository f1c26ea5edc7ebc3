"""The TransactionCoordinator's rules on its real state file, with a fake clock for its timer, a
counter for producer ids and a recorder for the markers it writes (pure logic otherwise)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from group_logic import FakeTime
from kio.schema.errors import ErrorCode

from eoslab.refbroker.control_batch import EndTxnMarker
from eoslab.refbroker.transactions import transaction_state_manager
from eoslab.refbroker.transactions.transaction_coordinator import (
    TransactionConfig,
    TransactionCoordinator,
)
from eoslab.refbroker.transactions.transaction_metadata import MAX_EPOCH, TransactionState
from eoslab.refbroker.transactions.transaction_state_manager import TransactionStateManager

E = ErrorCode
TID = "tx"
TIMEOUT_MS = 60_000
ABORT_INTERVAL_MS = 1_000


@dataclass
class Markers:
    """The broker's side of WriteTxnMarkers: what was written, and a switch to fail it."""

    written: list[tuple[int, int, bool, tuple[tuple[str, int], ...]]] = field(default_factory=list)
    failing: bool = False

    def write_txn_markers(
        self, producer_id: int, producer_epoch: int, marker: EndTxnMarker, partitions: object
    ) -> bool:
        if self.failing:
            return False
        self.written.append((producer_id, producer_epoch, marker.commit, tuple(partitions)))  # type: ignore[arg-type]
        return True


@dataclass
class Ids:
    counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))

    def generate_producer_id(self) -> int:
        return next(self.counter)


@dataclass
class Harness:
    directory: Path
    time: FakeTime = field(default_factory=FakeTime)
    markers: Markers = field(default_factory=Markers)
    ids: Ids = field(default_factory=Ids)
    coordinator: TransactionCoordinator = field(init=False)

    def __post_init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        """A new coordinator on the same state file (what survives a kill -9)."""
        state = TransactionStateManager(self.directory, sync=True)
        config = TransactionConfig(
            abort_timed_out_transaction_cleanup_interval_ms=ABORT_INTERVAL_MS
        )
        self.coordinator = TransactionCoordinator(
            state, self.ids, self.markers, config, scheduler=self.time
        )
        self.coordinator.abort_timed_out_transactions()

    def init(self, expected: tuple[int, int] | None = None) -> tuple[ErrorCode, int, int]:
        result = self.coordinator.handle_init_producer_id(TID, TIMEOUT_MS, expected)
        return result.error, result.producer_id, result.producer_epoch

    def state(self) -> TransactionState:
        metadata = self.coordinator.state.get(TID)
        assert metadata is not None
        return metadata.state


@pytest.fixture
def harness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Harness:
    clock = FakeTime()
    monkeypatch.setattr(
        "eoslab.refbroker.transactions.transaction_coordinator.now_ms", clock.__call__
    )
    return Harness(tmp_path, clock)


def test_a_new_transactional_id_starts_at_epoch_0_and_each_init_bumps_it(
    harness: Harness,
) -> None:
    assert harness.init() == (E.none, 1000, 0)
    assert harness.init() == (E.none, 1000, 1)
    # KIP-360: the producer names the epoch it had; a retry of that bump gets the same answer
    assert harness.init((1000, 1)) == (E.none, 1000, 2)
    assert harness.init((1000, 1)) == (E.none, 1000, 2)
    assert harness.init((1000, 2)) == (E.none, 1000, 3)
    assert harness.init((1000, 1))[0] is E.producer_fenced  # neither current nor last
    assert harness.init((999, 2))[0] is E.producer_fenced  # another producer id


def test_invalid_timeouts_and_empty_ids_are_refused(harness: Harness) -> None:
    coordinator = harness.coordinator
    assert coordinator.handle_init_producer_id(TID, 900_001, None).error is (
        E.invalid_transaction_timeout
    )
    assert coordinator.handle_init_producer_id(TID, 0, None).error is E.invalid_transaction_timeout
    assert coordinator.handle_init_producer_id("", TIMEOUT_MS, None).error is E.invalid_request


def test_an_exhausted_epoch_rotates_the_producer_id(harness: Harness) -> None:
    harness.init()
    metadata = harness.coordinator.state.get(TID)
    assert metadata is not None
    harness.coordinator.state.put(replace(metadata, producer_epoch=MAX_EPOCH - 1))
    assert harness.init() == (E.none, 1001, 0)


def test_add_partitions_then_commit_writes_markers_and_completes(harness: Harness) -> None:
    _, pid, epoch = harness.init()
    add = harness.coordinator.handle_add_partitions
    assert add(TID, pid, epoch, [("t", 0), ("t", 1)]) is E.none
    assert harness.state() is TransactionState.ONGOING
    assert add(TID, pid, epoch, [("t", 0)]) is E.none  # already in: nothing stored
    assert add(TID, pid + 1, epoch, [("t", 2)]) is E.invalid_producer_id_mapping
    assert add(TID, pid, epoch + 1, [("t", 2)]) is E.producer_fenced
    assert add("other", pid, epoch, [("t", 2)]) is E.invalid_producer_id_mapping
    assert harness.coordinator.handle_end_txn(TID, pid, epoch, commit=True) is E.none
    assert harness.markers.written == [(pid, epoch, True, (("t", 0), ("t", 1)))]
    assert harness.state() is TransactionState.COMPLETE_COMMIT
    # a retry of the commit is fine, an abort now is not
    assert harness.coordinator.handle_end_txn(TID, pid, epoch, commit=True) is E.none
    assert harness.coordinator.handle_end_txn(TID, pid, epoch, commit=False) is E.invalid_txn_state


def test_end_txn_without_a_transaction_is_an_invalid_state(harness: Harness) -> None:
    _, pid, epoch = harness.init()
    assert harness.coordinator.handle_end_txn(TID, pid, epoch, commit=True) is E.invalid_txn_state
    assert harness.markers.written == []


def test_init_fences_an_open_transaction_with_an_abort_at_a_bumped_epoch(harness: Harness) -> None:
    _, pid, epoch = harness.init()
    harness.coordinator.handle_add_partitions(TID, pid, epoch, [("t", 0)])
    assert harness.init() == (E.concurrent_transactions, -1, -1)
    assert harness.markers.written == [(pid, epoch + 1, False, (("t", 0),))]
    assert harness.state() is TransactionState.COMPLETE_ABORT
    assert harness.init() == (E.none, pid, epoch + 2)  # the client's retry
    # the fenced producer's requests
    assert harness.coordinator.handle_end_txn(TID, pid, epoch, commit=True) is E.producer_fenced
    assert harness.coordinator.handle_add_partitions(TID, pid, epoch, [("t", 0)]) is (
        E.producer_fenced
    )


def test_a_transaction_open_past_its_timeout_is_aborted_at_a_bumped_epoch(
    harness: Harness,
) -> None:
    _, pid, epoch = harness.init()
    harness.coordinator.handle_add_partitions(TID, pid, epoch, [("t", 0)])
    harness.time.advance(TIMEOUT_MS)
    assert harness.state() is TransactionState.ONGOING  # start + timeout is not yet < now
    harness.time.advance(ABORT_INTERVAL_MS)
    assert harness.state() is TransactionState.COMPLETE_ABORT
    assert harness.markers.written == [(pid, epoch + 1, False, (("t", 0),))]
    assert harness.coordinator.handle_end_txn(TID, pid, epoch, commit=True) is E.producer_fenced


def test_markers_not_written_are_written_again_after_a_restart(harness: Harness) -> None:
    """A kill -9 between PrepareCommit and the markers: the restarted coordinator completes the
    commit; meanwhile the client is told to wait."""
    _, pid, epoch = harness.init()
    harness.coordinator.handle_add_partitions(TID, pid, epoch, [("t", 0)])
    harness.markers.failing = True
    assert harness.coordinator.handle_end_txn(TID, pid, epoch, commit=True) is E.none
    assert harness.state() is TransactionState.PREPARE_COMMIT
    assert harness.coordinator.handle_end_txn(TID, pid, epoch, commit=True) is (
        E.concurrent_transactions
    )
    assert harness.init() == (E.concurrent_transactions, -1, -1)
    harness.markers.failing = False
    harness.coordinator.shutdown()
    harness.restart()
    assert harness.markers.written == [(pid, epoch, True, (("t", 0),))]
    assert harness.state() is TransactionState.COMPLETE_COMMIT


def test_the_state_survives_a_restart_and_a_torn_tail(harness: Harness) -> None:
    _, pid, epoch = harness.init()
    harness.coordinator.handle_add_partitions(TID, pid, epoch, [("t", 0)])
    path = harness.directory / transaction_state_manager.FILE_NAME
    whole = path.read_bytes()
    path.write_bytes(whole + whole[:7])  # a crash in the middle of the next record
    harness.restart()
    assert harness.state() is TransactionState.ONGOING
    assert harness.coordinator.state.recovered_bytes_truncated == 7
    assert harness.coordinator.handle_end_txn(TID, pid, epoch, commit=False) is E.none


def test_verification_answers_as_the_partition_leader_maps_it(harness: Harness) -> None:
    _, pid, epoch = harness.init()
    verify = harness.coordinator.handle_verify_partition
    assert verify(TID, pid, epoch, ("t", 0), abortable=False) is E.invalid_txn_state
    assert verify(TID, pid, epoch, ("t", 0), abortable=True) is E.transaction_abortable
    harness.coordinator.handle_add_partitions(TID, pid, epoch, [("t", 0)])
    assert verify(TID, pid, epoch, ("t", 0), abortable=False) is E.none
    assert verify(TID, pid, epoch - 1, ("t", 0), abortable=False) is E.invalid_producer_epoch
    assert verify(None, pid, epoch, ("t", 0), abortable=False) is E.invalid_request


def test_describe_and_list(harness: Harness) -> None:
    _, pid, epoch = harness.init()
    harness.coordinator.handle_add_partitions(TID, pid, epoch, [("t", 0)])
    error, described = harness.coordinator.handle_describe(TID)
    assert error is E.none
    assert described is not None
    assert (described.state, described.partitions) == (TransactionState.ONGOING, {("t", 0)})
    assert harness.coordinator.handle_describe("nope") == (E.transactional_id_not_found, None)
    unknown, listed = harness.coordinator.handle_list(["Ongoing", "Bogus"], [], -1)
    assert unknown == ["Bogus"]
    assert [m.transactional_id for m in listed] == [TID]
    assert harness.coordinator.handle_list(["Empty"], [], -1)[1] == []
    assert harness.coordinator.handle_list([], [pid + 1], -1)[1] == []
