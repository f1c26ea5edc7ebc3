"""The record of every fault a service applied: one JSON line each, with a wall-clock time, for
the report's timeline and for `GET /log`."""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import TextIO

from eoslab.clock import now_ms

MEMORY_ENTRIES = 100_000
"""`GET /log` answers from memory; the file, when there is one, keeps everything."""


class FaultLog:
    def __init__(self, path: Path | None = None) -> None:
        self._entries: deque[dict[str, object]] = deque(maxlen=MEMORY_ENTRIES)
        self._file: TextIO | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", encoding="utf-8")

    def record(self, **fields: object) -> dict[str, object]:
        """Append one entry (``ts_ms`` first, then ``fields``); returns it."""
        entry: dict[str, object] = {"ts_ms": now_ms(), **fields}
        self._entries.append(entry)
        if self._file is not None:
            self._file.write(json.dumps(entry, sort_keys=True) + "\n")
            self._file.flush()
        return entry

    def entries(self) -> list[dict[str, object]]:
        return list(self._entries)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
