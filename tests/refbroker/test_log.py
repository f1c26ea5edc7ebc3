"""The partition log on a real file system: append, read, offsets, segments, restart, hostile bytes."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.records.readers import read_batch
from kio.schema.errors import ErrorCode
from record_batches import make_batch

from eoslab.refbroker.batch_header import BatchHeader
from eoslab.refbroker.log_manager import (
    InvalidTopicError,
    LogManager,
    OffsetOutOfRangeError,
    PartitionLog,
    Rules,
    StorageConfig,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)

PID = 1_000_000_001
NOW = int(time.time() * 1000)  # snapshots drop producers idle for producer_id_expiration_ms


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[LogManager]:
    logs = LogManager(StorageConfig(tmp_path / "data"))
    logs.create_topic("t", 1)
    yield logs
    logs.close()


def batches_in(data: bytes) -> list[BatchHeader]:
    headers, position = [], 0
    while position < len(data):
        header = BatchHeader.parse(data, position)
        headers.append(header)
        position += header.size
    return headers


def send(log: PartitionLog, seq: int, count: int = 1, epoch: int = 0, **kwargs: object) -> tuple:
    kwargs.setdefault("timestamp_ms", NOW)
    result = log.append(make_batch(PID, epoch, seq, count, **kwargs), NOW)
    return result.error, result.base_offset, result.duplicate


def test_append_assigns_offsets_and_stores_the_batch_as_received(manager: LogManager) -> None:
    log = manager.partition("t", 0)
    assert send(log, 0, 3) == (ErrorCode.none, 0, False)
    compressed = make_batch(PID, 0, 3, 2, timestamp_ms=NOW, compressed=True)
    assert log.append(compressed, NOW).base_offset == 3
    assert log.log_end_offset == 5
    data = log.read(0, 1 << 20)
    first, size = read_batch(data, 0)  # an independent reader: CRC and records intact
    assert [r.offset for r in first.records] == [0, 1, 2]
    assert data[size + 8 :] == compressed[8:]
    assert struct.unpack_from(">q", data, size)[0] == 3


def test_read_returns_whole_batches_and_at_least_one(manager: LogManager) -> None:
    log = manager.partition("t", 0)
    for seq in range(0, 30, 3):
        send(log, seq, 3)
    one = len(make_batch(PID, 0, 0, 3))
    assert [h.base_offset for h in batches_in(log.read(4, 1))] == [3]
    assert [h.base_offset for h in batches_in(log.read(4, 2 * one))] == [3, 6]
    assert log.read(30, 100) == b""
    for bad in (-1, 31):
        with pytest.raises(OffsetOutOfRangeError):
            log.read(bad, 100)


def test_list_offset(manager: LogManager) -> None:
    log = manager.partition("t", 0)
    assert log.list_offset(-3) == (-1, -1)
    for i in range(4):
        send(log, i * 2, 2, timestamp_ms=NOW + i * 10)
    assert log.list_offset(-2) == (0, -1)
    assert log.list_offset(-1) == (8, -1)
    assert log.list_offset(NOW + 15) == (4, NOW + 20)
    assert log.list_offset(NOW) == (0, NOW)
    assert log.list_offset(NOW + 31) == (-1, -1)
    assert log.list_offset(-3) == (7, NOW + 30)


def test_segments_roll_with_indexes_and_snapshots(tmp_path: Path) -> None:
    config = StorageConfig(tmp_path, segment_bytes=1000)
    logs = LogManager(config)
    logs.create_topic("roll-me", 1)
    log = logs.partition("roll-me", 0)
    for seq in range(60):
        send(log, seq, value=b"x" * 100, timestamp_ms=NOW + seq)
    directory = tmp_path / "roll-me-0"
    segments = sorted(p.name for p in directory.glob("*.log"))
    assert len(segments) > 5
    assert segments[0] == f"{0:020d}.log"
    assert all((directory / s.replace(".log", ".index")).exists() for s in segments[:-1])
    assert list(directory.glob("*.snapshot"))
    assert [h.base_offset for h in batches_in(log.read(0, 1 << 20))] == list(range(60))
    assert log.list_offset(NOW + 33) == (33, NOW + 33)
    logs.close()
    for index in directory.glob("*.index"):
        index.write_bytes(b"garbage")  # indexes are rebuilt when unusable
    reopened = LogManager(config).partition("roll-me", 0)
    assert batches_in(reopened.read(17, 1 << 20))[0].base_offset == 17
    assert reopened.list_offset(NOW + 33) == (33, NOW + 33)


@pytest.mark.parametrize("clean", [True, False])
def test_retry_across_a_restart_is_deduplicated(tmp_path: Path, clean: bool) -> None:
    config = StorageConfig(tmp_path, segment_bytes=700)
    logs = LogManager(config)
    logs.create_topic("t", 2)
    log = logs.partition("t", 1)
    for seq in range(0, 40, 2):
        send(log, seq, 2)
    if clean:
        logs.close()
    log = LogManager(config).partition("t", 1)
    assert log.log_end_offset == 40
    for seq in range(30, 40, 2):
        assert send(log, seq, 2) == (ErrorCode.none, seq, True)
    assert send(log, 28, 2)[0] == ErrorCode.out_of_order_sequence_number
    assert send(log, 40, 2) == (ErrorCode.none, 40, False)
    (view,) = log.active_producers()
    assert (view.producer_id, view.producer_epoch, view.last_sequence) == (PID, 0, 41)


def test_a_corrupt_snapshot_falls_back_to_the_log(tmp_path: Path) -> None:
    config = StorageConfig(tmp_path)
    logs = LogManager(config)
    logs.create_topic("t", 1)
    for seq in range(5):
        send(logs.partition("t", 0), seq)
    logs.close()
    for snap in (tmp_path / "t-0").glob("*.snapshot"):
        snap.write_bytes(snap.read_bytes()[:-3] + b"bad")
    log = LogManager(config).partition("t", 0)
    assert send(log, 4) == (ErrorCode.none, 4, True)


@pytest.mark.parametrize(
    ("rules", "after_delete"),
    [
        (Rules.KAFKA_3_9, ErrorCode.none),
        (Rules.KAFKA_2_0, ErrorCode.unknown_producer_id),
    ],
)
def test_delete_records(tmp_path: Path, rules: Rules, after_delete: ErrorCode) -> None:
    config = StorageConfig(tmp_path, rules=rules, segment_bytes=500)
    logs = LogManager(config)
    logs.create_topic("t", 1)
    log = logs.partition("t", 0)
    for seq in range(20):
        send(log, seq, value=b"y" * 50)
    segments_before = len(list((tmp_path / "t-0").glob("*.log")))
    assert log.delete_records(7) == 7
    assert log.delete_records(3) == 7
    assert len(list((tmp_path / "t-0").glob("*.log"))) < segments_before
    with pytest.raises(OffsetOutOfRangeError):
        log.read(6, 100)
    assert batches_in(log.read(7, 1))[0].base_offset == 7
    assert log.list_offset(-2) == (7, -1)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(21)
    assert log.delete_records(-1) == 20
    assert log.read(20, 100) == b""
    logs.close()
    log = LogManager(config).partition("t", 0)
    assert (log.log_start_offset, log.log_end_offset) == (20, 20)
    assert send(log, 20)[0] == after_delete  # the KIP-360 path: state gone only under 2.0


@pytest.mark.parametrize(
    ("records", "error"),
    [
        (b"", ErrorCode.invalid_record),
        # Torn: Kafka's batch iterator finds no whole batch -> INVALID_RECORD.
        (make_batch(PID, 0, 0)[:40], ErrorCode.invalid_record),
        (make_batch(PID, 0, 0)[:-1], ErrorCode.invalid_record),
        (make_batch(PID, 0, 0) * 2, ErrorCode.invalid_record),
        (make_batch(PID, 0, 0) + b"\x00", ErrorCode.invalid_record),
        (make_batch(PID, 0, 0)[:-1] + b"\xff", ErrorCode.corrupt_message),
        (
            make_batch(PID, 0, 0)[:16] + b"\x01" + make_batch(PID, 0, 0)[17:],
            ErrorCode.invalid_record,
        ),
        (
            make_batch(PID, 0, 0)[:16] + b"\x00" + make_batch(PID, 0, 0)[17:],
            ErrorCode.invalid_record,
        ),
        (
            make_batch(PID, 0, 0)[:16] + b"\x07" + make_batch(PID, 0, 0)[17:],
            ErrorCode.corrupt_message,
        ),
        (
            make_batch(PID, 0, 0)[:8] + struct.pack(">i", -5) + make_batch(PID, 0, 0)[12:],
            ErrorCode.corrupt_message,
        ),
        (make_batch(PID, 0, -3), ErrorCode.invalid_record),
        (make_batch(PID, 0, 0, value=b"z" * 2_000_000), ErrorCode.message_too_large),
    ],
)
def test_malformed_records_are_refused_and_nothing_is_written(
    manager: LogManager, records: bytes, error: ErrorCode
) -> None:
    log = manager.partition("t", 0)
    result = log.append(records, NOW)
    assert (result.error, result.base_offset, result.duplicate) == (error, -1, False)
    assert result.error_message
    assert log.log_end_offset == 0
    assert (manager.config.data_dir / "t-0" / f"{0:020d}.log").stat().st_size == 0


HOSTILE = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@HOSTILE
@given(st.binary(max_size=200))
def test_random_bytes_are_refused(manager: LogManager, noise: bytes) -> None:
    log = manager.partition("t", 0)
    assert log.append(noise, NOW).error != ErrorCode.none
    assert log.log_end_offset == 0


@HOSTILE
@given(st.data())
def test_any_flipped_byte_from_the_magic_on_is_refused(
    manager: LogManager, data: st.DataObject
) -> None:
    batch = bytearray(make_batch(PID, 0, 0, 2, compressed=data.draw(st.booleans())))
    batch[data.draw(st.integers(16, len(batch) - 1))] ^= data.draw(st.integers(1, 255))
    log = manager.partition("t", 0)
    assert log.append(bytes(batch), NOW).error != ErrorCode.none
    assert log.log_end_offset == 0


def test_topics(tmp_path: Path) -> None:
    logs = LogManager(StorageConfig(tmp_path))
    logs.create_topic("a-b-c", 3)
    logs.create_topic("x", 1)
    with pytest.raises(TopicExistsError):
        logs.create_topic("x", 2)
    for bad_name, count in (("bad/name", 1), ("", 1), ("..", 1), ("ok", 0)):
        with pytest.raises(InvalidTopicError):
            logs.create_topic(bad_name, count)
    assert logs.topics() == {"a-b-c": 3, "x": 1}
    logs.delete_topic("x")
    with pytest.raises(UnknownTopicOrPartitionError):
        logs.delete_topic("x")
    with pytest.raises(UnknownTopicOrPartitionError):
        logs.partition("a-b-c", 3)
    assert not (tmp_path / "x-0").exists()
    logs.close()
    assert LogManager(StorageConfig(tmp_path)).topics() == {"a-b-c": 3}


def test_run_time_faults(manager: LogManager) -> None:
    log = manager.partition("t", 0)
    for seq in range(5):
        send(log, seq)
    manager.set_retained_batches(1)
    assert send(log, 3)[0] == ErrorCode.out_of_order_sequence_number
    assert send(log, 4) == (ErrorCode.none, 4, True)
    manager.rules = Rules.LEGACY
    assert send(log, 4) == (ErrorCode.none, 5, False)
    manager.rules = Rules.KAFKA_2_0
    assert manager.expire_producers(NOW, producer_id=PID + 1, force=True) == 0
    assert manager.expire_producers(NOW, producer_id=PID, force=True) == 1
    assert send(log, 9)[0] == ErrorCode.unknown_producer_id
    assert send(log, 0) == (ErrorCode.none, 6, False)
    assert manager.expire_producers(NOW + 86_400_000 - 1) == 0
    assert manager.expire_producers(NOW + 86_400_000) == 1
