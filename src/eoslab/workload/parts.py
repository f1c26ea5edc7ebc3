"""Parquet part files, the unit every journal of the workload is sealed in (the history, the
consumption, transactions, copier and reader files): written whole or not at all, so a session
killed mid-write leaves no half a file for the checker to trip on."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def write_part(table: pa.Table, final: Path) -> None:
    """Write a Parquet file under a hidden name, then rename it: a reader sees all or nothing."""
    partial = final.with_name(f".{final.name}.partial")
    pq.write_table(table, partial)
    os.replace(partial, final)
