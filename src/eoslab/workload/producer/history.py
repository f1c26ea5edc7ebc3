"""The history: each record's final outcome, in Parquet, written so a crash costs little.

A producer session buffers outcome rows and writes each batch as its own Parquet file
(written under a hidden name, then renamed: a reader never sees half a file). Parquet has
no append, and a file killed mid-write has no footer, so a batch per file is what bounds
the loss of a killed producer to its unflushed tail.

Beside it, the send journal: one line per record, written (a syscall, no buffering) just
before the record is handed to librdkafka. It survives a kill -9 in the page cache, so
after a crash :func:`settle_killed_session` can turn every journaled record without an
outcome row into an ``indeterminate`` row.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from eoslab.rundir import HISTORY_SCHEMA, Outcome, RunDir
from eoslab.workload.parts import write_part
from eoslab.workload.producer.outcomes import PRODUCER_KILLED


class HistoryWriter:
    """One producer session's outcome rows, flushed by count or age into part files."""

    def __init__(
        self,
        run_dir: RunDir,
        run_id: str,
        session_id: str,
        producer: int,
        *,
        flush_rows: int = 1000,
        flush_interval_s: float = 0.5,
        first_part: int = 0,
    ) -> None:
        self._run_dir = run_dir
        self._run_id = run_id
        self._session_id = session_id
        self._producer = producer
        self._flush_rows = flush_rows
        self._flush_interval_s = flush_interval_s
        self._part = first_part
        self._rows: dict[str, list[object]] = {name: [] for name in HISTORY_SCHEMA.names}
        self._buffered = 0
        self._last_flush = time.monotonic()
        self.rows_written = 0

    def add(
        self,
        *,
        partition: int,
        seq: int,
        key: str,
        key_seq: int,
        send_ms: int,
        outcome: Outcome,
        offset: int | None = None,
        error: str | None = None,
        ack_ms: int | None = None,
        latency_ms: float | None = None,
    ) -> None:
        row = (
            self._run_id,
            self._session_id,
            self._producer,
            partition,
            seq,
            key,
            key_seq,
            send_ms,
            outcome.value,
            offset,
            error,
            ack_ms,
            latency_ms,
        )
        for name, value in zip(HISTORY_SCHEMA.names, row, strict=True):
            self._rows[name].append(value)
        self._buffered += 1

    @property
    def pending(self) -> int:
        """Rows added and not yet written."""
        return self._buffered

    def maybe_flush(self) -> None:
        due = time.monotonic() - self._last_flush >= self._flush_interval_s
        if self._buffered >= self._flush_rows or (due and self._buffered):
            self.flush()

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        if not self._buffered:
            return
        table = pa.Table.from_pydict(self._rows, schema=HISTORY_SCHEMA)
        write_part(table, self._run_dir.history_file(self._producer, self._session_id, self._part))
        self._part += 1
        self.rows_written += self._buffered
        self._rows = {name: [] for name in HISTORY_SCHEMA.names}
        self._buffered = 0


@dataclass(frozen=True, slots=True)
class JournalEntry:
    partition: int
    seq: int
    key: str
    key_seq: int
    send_ms: int


class SendJournal:
    """Append-only, unbuffered: each line is in the kernel before the record is produced."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def record(self, partition: int, seq: int, key: str, key_seq: int, send_ms: int) -> None:
        os.write(self._fd, f"{partition}\t{seq}\t{key}\t{key_seq}\t{send_ms}\n".encode())

    def close(self) -> None:
        os.close(self._fd)


def read_journal(path: Path) -> list[JournalEntry]:
    """The journaled sends; a torn last line (killed mid-write) was never produced: skipped."""
    if not path.exists():
        return []
    entries = []
    for line in path.read_bytes().split(b"\n"):
        fields = line.decode(errors="replace").split("\t")
        if len(fields) != 5:
            continue
        try:
            entries.append(
                JournalEntry(
                    int(fields[0]), int(fields[1]), fields[2], int(fields[3]), int(fields[4])
                )
            )
        except ValueError:
            continue
    return entries


def session_history_files(run_dir: RunDir, producer: int, session_id: str) -> list[Path]:
    return sorted(run_dir.history_dir.glob(f"p{producer}-{session_id}-*.parquet"))


def settle_killed_session(run_dir: RunDir, run_id: str, session_id: str, producer: int) -> int:
    """Write an ``indeterminate`` row (error PRODUCER_KILLED) for every journaled record of a
    killed session that has no outcome row; returns how many."""
    files = session_history_files(run_dir, producer, session_id)
    known: set[tuple[int, int]] = set()
    if files:
        table = pq.ParquetDataset(files).read(columns=["partition", "seq"])
        known = set(
            zip(table.column("partition").to_pylist(), table.column("seq").to_pylist(), strict=True)
        )
    writer = HistoryWriter(run_dir, run_id, session_id, producer, first_part=len(files))
    for entry in read_journal(run_dir.journal_file(session_id)):
        if (entry.partition, entry.seq) not in known:
            writer.add(
                partition=entry.partition,
                seq=entry.seq,
                key=entry.key,
                key_seq=entry.key_seq,
                send_ms=entry.send_ms,
                outcome=Outcome.INDETERMINATE,
                error=PRODUCER_KILLED,
            )
    settled = writer.pending
    writer.flush()
    return settled
