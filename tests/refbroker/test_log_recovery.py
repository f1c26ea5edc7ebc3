"""Crash recovery: torn tails are cut, and kill -9 loses no acknowledged batch with fsync every-batch."""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from record_batches import make_batch

from eoslab.refbroker.batch_header import BatchHeader, crc_is_valid
from eoslab.refbroker.log_manager import LogManager, StorageConfig

PID = 1_000_000_002
BASE = 1_765_000_000_000
HERE = Path(__file__).parent


def all_batches(logs: LogManager) -> list[tuple[BatchHeader, bytes]]:
    """Every stored batch, checked whole, CRC-valid and contiguous in offsets."""
    log = logs.partition("t", 0)
    data = log.read(log.log_start_offset, 1 << 30)
    batches, position, expected = [], 0, log.log_start_offset
    while position < len(data):
        header = BatchHeader.parse(data, position)
        raw = data[position : position + header.size]
        assert len(raw) == header.size
        assert crc_is_valid(raw, header)
        assert header.base_offset == expected
        expected = header.last_offset + 1
        batches.append((header, raw))
        position += header.size
    assert expected == log.log_end_offset
    return batches


@pytest.mark.parametrize("clean_close", [True, False])
def test_torn_tail_is_cut_back_to_the_last_whole_batch(tmp_path: Path, clean_close: bool) -> None:
    now = int(time.time() * 1000)
    config = StorageConfig(tmp_path)
    logs = LogManager(config)
    logs.create_topic("t", 1)
    for seq in range(10):
        logs.partition("t", 0).append(make_batch(PID, 0, seq, timestamp_ms=now), now)
    if clean_close:
        logs.close()  # leaves a snapshot at offset 10, which the tear makes stale
    segment = tmp_path / "t-0" / f"{0:020d}.log"
    size = segment.stat().st_size
    last = len(make_batch(PID, 0, 9, timestamp_ms=now))
    with segment.open("r+b") as f:
        f.truncate(size - last // 2)
        f.seek(0, os.SEEK_END)
        f.write(b"\xde\xad\xbe\xef" * 50)
    recovered = LogManager(config)
    log = recovered.partition("t", 0)
    assert log.recovered_bytes_truncated == last - last // 2 + 200
    assert log.log_end_offset == 9
    assert [h.base_sequence for h, _ in all_batches(recovered)] == list(range(9))
    assert segment.stat().st_size == size - last
    retry = log.append(make_batch(PID, 0, 8, timestamp_ms=now), now)
    assert (retry.error, retry.base_offset, retry.duplicate) == (ErrorCode.none, 8, True)
    resend = log.append(make_batch(PID, 0, 9, timestamp_ms=now), now)
    assert (resend.error, resend.base_offset, resend.duplicate) == (ErrorCode.none, 9, False)


def test_a_corrupt_batch_cuts_the_log_from_there(tmp_path: Path) -> None:
    config = StorageConfig(tmp_path)
    logs = LogManager(config)
    logs.create_topic("t", 1)
    for seq in range(6):
        logs.partition("t", 0).append(make_batch(PID, 0, seq), 0)
    segment = tmp_path / "t-0" / f"{0:020d}.log"
    data = bytearray(segment.read_bytes())
    one = len(make_batch(PID, 0, 0))
    data[3 * one + 40] ^= 0xFF  # inside batch 3, covered by its CRC
    segment.write_bytes(bytes(data))
    recovered = LogManager(config)
    assert recovered.partition("t", 0).log_end_offset == 3
    assert len(all_batches(recovered)) == 3


def index_files(partition_dir: Path) -> dict[str, tuple[int, bytes]]:
    """Each index file of a partition: its inode (a file written again is a new one) and
    its bytes."""
    return {
        path.name: (path.stat().st_ino, path.read_bytes())
        for path in sorted(partition_dir.iterdir())
        if path.suffix in (".index", ".timeindex")
    }


def test_a_restart_writes_again_only_the_indexes_that_changed(tmp_path: Path) -> None:
    """Recovery rebuilds every segment's indexes from its batches and writes them where they
    differ from the files: a partition nobody wrote since is left alone (a broker of 700
    partitions fsynced 2,800 unchanged files at every restart), one written since (its
    indexes behind its batches after a kill -9) gets them written, and reads by time find
    its records."""
    config = StorageConfig(tmp_path)
    logs = LogManager(config)
    logs.create_topic("idle", 1)
    logs.create_topic("busy", 1)
    for seq in range(4):
        logs.partition("idle", 0).append(make_batch(PID, 0, seq), 0)
    logs.close()
    LogManager(config)  # the indexes of both written as the batches give them
    idle, busy = index_files(tmp_path / "idle-0"), index_files(tmp_path / "busy-0")

    again = LogManager(config)
    for seq in range(200):  # past index intervals (4 KiB): new index entries
        now = BASE + seq
        again.partition("busy", 0).append(make_batch(PID + 1, 0, seq, timestamp_ms=now), now)
    # killed -9: no close, the indexes on disk are those of the restart before
    assert index_files(tmp_path / "busy-0") == busy
    recovered = LogManager(config)

    assert index_files(tmp_path / "idle-0") == idle
    written = index_files(tmp_path / "busy-0")
    assert written.keys() == busy.keys()
    assert all(written[name] != busy[name] for name in busy)
    log = recovered.partition("busy", 0)
    assert log.log_end_offset == 200
    assert log.list_offset(BASE + 150) == (150, BASE + 150)


CHILD = r"""
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from record_batches import make_batch
from eoslab.refbroker.log_manager import LogManager, StorageConfig

logs = LogManager(StorageConfig(Path(sys.argv[2]), fsync="every-batch", segment_bytes=2048))
if "t" not in logs.topics():
    logs.create_topic("t", 1)
log = logs.partition("t", 0)
pid = int(sys.argv[3])
for i in range(100_000):
    now = int(time.time() * 1000)
    result = log.append(make_batch(pid, 0, 2 * i, 2, timestamp_ms=now), now)
    if result.error != 0:
        print("ERROR", result.error, flush=True)
        break
    print(2 * i, result.base_offset, flush=True)
"""


def run_until_killed(data_dir: Path, pid: int, acks_before_kill: int) -> list[tuple[int, int]]:
    """Run a writer, SIGKILL it once it reported `acks_before_kill` appends, return every ack."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(HERE), str(data_dir), str(pid)],
        stdout=subprocess.PIPE,
        text=True,
    )
    stdout = child.stdout
    assert stdout is not None
    acks: list[tuple[int, int]] = []
    try:
        deadline = time.monotonic() + 60
        while len(acks) < acks_before_kill:
            assert time.monotonic() < deadline, "writer too slow"
            ready, _, _ = select.select([stdout], [], [], 1.0)
            if ready:
                line = stdout.readline()
                assert line, "the writer exited before it was killed"
                assert not line.startswith("ERROR"), line
                seq, offset = line.split()
                acks.append((int(seq), int(offset)))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        # acks the writer printed after its append returned but that were not read yet
        for line in stdout:
            if line.strip():
                seq, offset = line.split()
                acks.append((int(seq), int(offset)))
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        stdout.close()
    assert child.returncode == -signal.SIGKILL
    return acks


def test_kill_9_loses_no_acknowledged_batch(tmp_path: Path) -> None:
    rng = random.Random(20240917)
    acked: dict[int, list[tuple[int, int]]] = {}
    for round_ in range(5):
        pid = PID + 100 + round_  # a new producer session after each broker crash
        acked[pid] = run_until_killed(tmp_path, pid, rng.randint(5, 60))
    logs = LogManager(StorageConfig(tmp_path))
    stored = {(h.producer_id, h.base_sequence): h.base_offset for h, _ in all_batches(logs)}
    for pid, acks in acked.items():
        for seq, offset in acks:
            assert stored[pid, seq] == offset, f"acknowledged batch {pid}/{seq} lost or moved"
    last_pid = max(acked)
    seq, offset = acked[last_pid][-1]
    now = int(time.time() * 1000)
    retry = logs.partition("t", 0).append(make_batch(last_pid, 0, seq, 2, timestamp_ms=now), now)
    assert (retry.error, retry.base_offset, retry.duplicate) == (ErrorCode.none, offset, True)
    logs.close()
