"""What the nemesis did to a run and what it saw happen: the fault half of the run-directory
contract (:mod:`eoslab.rundir`), written by the nemesis, read by the verdict and the reports.

Two records:

- :class:`FaultEvent`, one line of ``faults.jsonl`` each, as things happen: a step started a
  lasting fault (``start``), undid it (``end``: its duration passed or the run healed), did
  something at once (``instant``: a restart, a crash with its restart, a probe), never started
  (``skipped``: its trigger did not come before the workload ended), or failed (``failed``: the
  lab refused it; the message is in ``detail.error``). ``detail`` holds what was observed then
  (a pid, a leader, frames dropped, a generation).
- :class:`FaultEffect`, one per step of the run's timeline in ``run.json``'s ``faults``, written
  when the run ends: whether the step **took effect** — the process it killed was running and
  died, the proxy fault fired on at least one frame, the reference broker consumed the armed
  fault, the consumer crashed between an effect and its commit — with the one line of evidence
  that says so, or why not. A run with a step that did not take effect is **invalid**: its
  verdict never says "conforms" (:class:`eoslab.rundir.VerdictStatus`).
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class FaultPhase(StrEnum):
    START = "start"
    END = "end"
    INSTANT = "instant"
    SKIPPED = "skipped"
    FAILED = "failed"


class FaultEvent(BaseModel):
    """One line of ``faults.jsonl``."""

    model_config = ConfigDict(extra="forbid")

    ts_ms: int
    """Wall clock, as the history's times."""
    step: int | None = None
    """The timeline step's index in the scenario's ``nemesis`` list."""
    kind: str
    """The step kind (``kill``), with the fault's own kind for proxy and reference-broker
    faults (``proxy:drop-response``, ``refbroker:expire-producers``)."""
    target: str | None = None
    """The service, route, producer or consumer it acted on."""
    phase: FaultPhase
    detail: dict[str, Any] = Field(default_factory=dict)


class FaultEffect(BaseModel):
    """One timeline step, judged: did it take effect, and what shows it."""

    model_config = ConfigDict(extra="forbid")

    step: int
    kind: str
    target: str | None = None
    took_effect: bool
    evidence: str
    """One line: what was observed that shows the fault took effect, or why it did not."""
    observed: dict[str, Any] = Field(default_factory=dict)
    started_ms: int | None = None
    ended_ms: int | None = None

    @property
    def summary(self) -> str:
        where = f" {self.target}" if self.target else ""
        return f"step {self.step} ({self.kind}{where}): {self.evidence}"


def append_event(path: Path, event: FaultEvent) -> None:
    """Append one line in one write (O_APPEND): writers in several processes and threads
    interleave whole lines, never fragments."""
    line = (json.dumps(event.model_dump(mode="json"), separators=(",", ":")) + "\n").encode()
    with path.open("ab") as out:
        out.write(line)


def read_events(path: Path) -> list[FaultEvent]:
    """Every event of a ``faults.jsonl``, in the order written ([] if there is none)."""
    if not path.is_file():
        return []
    return [
        FaultEvent.model_validate_json(line)
        for line in path.read_text().splitlines()
        if line.strip()
    ]
