"""The record of every injected fault: one JSON line each, for the report's timeline."""

import json
import time
from collections import deque
from pathlib import Path
from typing import TextIO

from eoslab.chaos.api_keys import api_name
from eoslab.chaos.faults import ActiveFault, FrameContext

# GET /log answers from memory; the file (if any) keeps everything.
MEMORY_ENTRIES = 100_000


class FaultLog:
    def __init__(self, path: Path | None = None) -> None:
        self._entries: deque[dict[str, object]] = deque(maxlen=MEMORY_ENTRIES)
        self._file: TextIO | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", encoding="utf-8")

    def frame_fault(
        self, fault: ActiveFault, frame: FrameContext, connection_id: int, delay_s: float = 0.0
    ) -> None:
        """A fault that acted on one frame."""
        entry: dict[str, object] = {
            "route": frame.route,
            "connection": connection_id,
            "direction": frame.direction.value,
            "api": api_name(frame.api_key) if frame.api_key >= 0 else None,
            "api_key": frame.api_key,
            "correlation_id": frame.correlation_id,
        }
        if delay_s:
            entry["delay_ms"] = round(delay_s * 1000, 3)
        self._write(fault, entry)

    def connection_fault(self, fault: ActiveFault, route: str, connection_id: int) -> None:
        """A fault that acted on a whole connection (immediate reset, stalled accept)."""
        self._write(
            fault,
            {
                "route": route,
                "connection": connection_id,
                "direction": None,
                "api": None,
                "api_key": None,
                "correlation_id": None,
            },
        )

    def entries(self) -> list[dict[str, object]]:
        return list(self._entries)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _write(self, fault: ActiveFault, details: dict[str, object]) -> None:
        entry = {"ts_ms": time.time_ns() // 1_000_000, "fault_id": fault.id, "kind": fault.kind}
        entry.update(details)
        self._entries.append(entry)
        if self._file is not None:
            self._file.write(json.dumps(entry) + "\n")
            self._file.flush()
