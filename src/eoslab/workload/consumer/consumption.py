"""The consumption ledger: a consumer session's journal, sealed into Parquet when it ends.

The journal is the ledger while the session runs: one JSON line per row, written with one
write() on an O_APPEND descriptor (no buffering), so a row is in the kernel before the next
step of the consumer (for a processed record: before its offset is committed) and survives a
kill -9 in the page cache. A line torn by a kill mid-write was never followed by that step:
it is skipped.

Once the session's process has ended, cleanly or not, :func:`seal_session` writes the rows
as the session's two Parquet files of the contract (``eoslab.rundir``: PROCESSED_SCHEMA,
COMMITS_SCHEMA). One writer, one path for clean and killed sessions alike.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from eoslab.rundir import COMMITS_SCHEMA, PROCESSED_SCHEMA, RunDir
from eoslab.workload.parts import write_part

PROCESSED = "processed"
COMMIT = "commit"
TABLE_KEY = "table"
SCHEMAS: dict[str, pa.Schema] = {PROCESSED: PROCESSED_SCHEMA, COMMIT: COMMITS_SCHEMA}


class ConsumptionJournal:
    """Append-only, unbuffered: one line per ledger row, each in one write()."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def processed(self, row: dict[str, Any]) -> None:
        self._write(PROCESSED, row)

    def commit(self, row: dict[str, Any]) -> None:
        self._write(COMMIT, row)

    def _write(self, table: str, row: dict[str, Any]) -> None:
        line = json.dumps({TABLE_KEY: table, **row}, separators=(",", ":")) + "\n"
        os.write(self._fd, line.encode())

    def close(self) -> None:
        os.close(self._fd)


def read_journal(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(table, row) per whole line; a torn line (killed mid-write) is skipped."""
    if not path.exists():
        return
    with path.open("rb") as journal:
        for line in journal:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and row.get(TABLE_KEY) in SCHEMAS:
                yield row.pop(TABLE_KEY), row


def seal_session(run_dir: RunDir, consumer: int, session_id: str) -> dict[str, int]:
    """Write the session's journal as its Parquet files; rows per table. Sealing twice
    rewrites the same files."""
    rows: dict[str, list[dict[str, Any]]] = {table: [] for table in SCHEMAS}
    for table, row in read_journal(run_dir.consumer_journal_file(session_id)):
        rows[table].append(row)
    files = {
        PROCESSED: run_dir.processed_file(consumer, session_id),
        COMMIT: run_dir.commits_file(consumer, session_id),
    }
    for table, table_rows in rows.items():
        if table_rows:
            write_part(pa.Table.from_pylist(table_rows, schema=SCHEMAS[table]), files[table])
    return {table: len(table_rows) for table, table_rows in rows.items()}
