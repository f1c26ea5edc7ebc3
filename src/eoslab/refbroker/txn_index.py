"""The aborted transactions of one partition (Kafka's TransactionIndex, `.txnindex`), which a
read_committed Fetch returns so that consumers drop the aborted records.

One file per partition, `aborted-transactions.txnindex`, of fixed 34-byte entries in Kafka's
layout: version int16 (0), producer id int64, first offset int64, last offset int64 (the ABORT
marker's), last stable offset int64 (after the abort). Kafka keeps one such file per segment;
here one file covers the partition, in marker order. An entry is appended (and fsynced under
`--fsync every-batch`) right after its marker; recovery drops a torn entry and every entry
whose marker is no longer in the log (a log tail cut on recovery), and the log replay after the
producer-state snapshot re-adds one whose append a crash interrupted.
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from eoslab.refbroker.durable_files import write_atomically

FILE_NAME = "aborted-transactions.txnindex"
ENTRY = struct.Struct(">hqqqq")
VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, directory: Path, *, sync: bool, log_end_offset: int) -> None:
        """Load the index of the partition in `directory`, keeping the entries whose marker lies
        below `log_end_offset`."""
        self.path = directory / FILE_NAME
        self._sync = sync
        self._entries: list[AbortedTxn] = []
        data = self.path.read_bytes() if self.path.exists() else b""
        for position in range(0, len(data) - ENTRY.size + 1, ENTRY.size):
            version, *fields = ENTRY.unpack_from(data, position)
            entry = AbortedTxn(*fields)
            if version != VERSION or entry.last_offset >= log_end_offset:
                break
            self._entries.append(entry)
        if len(self._entries) * ENTRY.size != len(data):
            self._write_all()

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    def append(self, entry: AbortedTxn) -> None:
        """Add the entry of an ABORT marker; one already indexed (a replay) is ignored."""
        if self._entries and entry.last_offset <= self._entries[-1].last_offset:
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, ENTRY.pack(VERSION, *_fields(entry)))
            if self._sync:
                os.fdatasync(fd)
        finally:
            os.close(fd)
        self._entries.append(entry)

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """collectAbortedTxns: the aborted transactions that overlap [fetch_offset,
        upper_bound_offset): their marker at or after the first, their first offset before the
        second."""
        start = bisect.bisect_left([e.last_offset for e in self._entries], fetch_offset)
        return [e for e in self._entries[start:] if e.first_offset < upper_bound_offset]

    def _write_all(self) -> None:
        data = b"".join(ENTRY.pack(VERSION, *_fields(e)) for e in self._entries)
        write_atomically(self.path, data, sync=self._sync)


def _fields(entry: AbortedTxn) -> tuple[int, int, int, int]:
    return entry.producer_id, entry.first_offset, entry.last_offset, entry.last_stable_offset
