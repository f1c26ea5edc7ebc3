"""An append-only file of CRC-checked records: how the broker keeps its small durable states
(committed offsets and groups, transaction state), as Kafka keeps them in its internal topics.

    length uint32 | CRC-32C uint32 of the payload | payload

With `sync` (the broker's `--fsync every-batch`) every append is fdatasync'ed before it returns,
so a state change that was answered survives kill -9 and power loss; without it, the page cache
keeps it across kill -9 only. An append that fails is cut back, so the file never holds half a
record written by this process.

Opening replays every record into the owner's `apply` until the first one whose length or CRC is
wrong, or that `apply` refuses (CorruptRecordError), then cuts the file there: a torn tail from a
crash mid-write. `rewrite` replaces the whole file atomically (compaction).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable
from pathlib import Path

from crc32c import crc32c

from eoslab.refbroker.durable_files import fsync_dir, write_atomically

RECORD_HEADER = struct.Struct(">II")  # payload length, CRC-32C of the payload
MAX_RECORD_BYTES = 64 * 1024 * 1024
"""A length above this is a torn or corrupt header, never a record we wrote."""


class CorruptRecordError(ValueError):
    """A record whose payload its owner cannot read: it and everything after it are cut."""


def frame(payload: bytes) -> bytes:
    return RECORD_HEADER.pack(len(payload), crc32c(payload)) + payload


class RecordFile:
    def __init__(self, path: Path, *, sync: bool, apply: Callable[[bytes], None]) -> None:
        """Replay the records of `path` (created if missing) into `apply`, then open it for
        appending."""
        self.path = path
        self._sync = sync
        path.parent.mkdir(parents=True, exist_ok=True)
        self.recovered_bytes_truncated = self._recover(apply)
        # an unbuffered file object, so an abandoned file (crash simulation) closes on GC
        self._file = open(path, "ab", buffering=0)  # noqa: SIM115
        fsync_dir(path.parent)

    def append(self, payload: bytes) -> None:
        """One record, durable on return under `sync`; raises OSError with nothing appended."""
        data = frame(payload)
        fd = self._file.fileno()
        position = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if self._sync:
                os.fdatasync(fd)
        except OSError:
            os.ftruncate(fd, position)
            raise

    def rewrite(self, payloads: Iterable[bytes]) -> None:
        """Replace the file with these records, atomically (temporary file, fsync, rename)."""
        write_atomically(self.path, b"".join(frame(p) for p in payloads))
        self._file.close()
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115

    def close(self) -> None:
        self._file.close()

    def _recover(self, apply: Callable[[bytes], None]) -> int:
        if not self.path.exists():
            return 0
        data = self.path.read_bytes()
        position = 0
        while position + RECORD_HEADER.size <= len(data):
            length, crc = RECORD_HEADER.unpack_from(data, position)
            start = position + RECORD_HEADER.size
            payload = data[start : start + length]
            if length > MAX_RECORD_BYTES or len(payload) < length or crc32c(payload) != crc:
                break
            try:
                apply(payload)
            except CorruptRecordError:
                break
            position = start + length
        truncated = len(data) - position
        if truncated:
            with self.path.open("r+b") as torn:
                torn.truncate(position)
                os.fsync(torn.fileno())
        return truncated
