"""Where a matrix run is, read from its run directories: the cells' phases as they pass.

A cell has no run directory while it waits for the lab; its run.json appears when its
workload starts (``running``), gets ``ended_ms`` when the workload and the nemesis are done
(``checking``), and its verdict.json when the checker is done (``conforms``, ``does not
conform`` or ``invalid``: a fault that did not take effect). Records are the history's rows so far, read from the Parquet footers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from pydantic import ValidationError

from eoslab.clock import now_ms
from eoslab.orchestration.matrix import Cell
from eoslab.rundir import RunDir, RunInfo


class Phase(StrEnum):
    WAITING = "waiting"
    RUNNING = "running"
    CHECKING = "checking"
    CONFORMS = "conforms"
    DOES_NOT_CONFORM = "does not conform"
    INVALID = "invalid"

    @property
    def done(self) -> bool:
        return self in (Phase.CONFORMS, Phase.DOES_NOT_CONFORM, Phase.INVALID)


@dataclass(frozen=True)
class CellProgress:
    name: str
    """The cell as reports name it: ``scenario[.mode]/target``."""
    phase: Phase
    records: int = 0
    elapsed_s: float = 0.0
    mismatches: tuple[str, ...] = ()
    run_dir: Path | None = None


def label(cell: Cell) -> str:
    return f"{cell.name}/{cell.target}"


def _progress(name: str, run: RunDir, info: RunInfo) -> CellProgress:
    if run.verdict_json.is_file():
        verdict = run.read_verdict()
        return CellProgress(
            name,
            Phase(verdict.status.value),
            run.history_rows(),
            (verdict.checked_ms - info.started_ms) / 1000,
            tuple(verdict.invalid) + tuple(m.summary for m in verdict.mismatches),
            run.path,
        )
    phase = Phase.RUNNING if info.ended_ms is None else Phase.CHECKING
    return CellProgress(
        name, phase, run.history_rows(), (now_ms() - info.started_ms) / 1000, run_dir=run.path
    )


def watch(cells: Iterable[Cell], runs_dir: Path) -> list[CellProgress]:
    """Every cell's progress, in the order given; a run directory being written or rewritten
    this instant reads as its previous phase."""
    found: dict[str, CellProgress] = {}
    for run_json in sorted(runs_dir.glob("*/run.json")):
        run = RunDir(run_json.parent)
        try:
            info = run.read_info()
            name = f"{info.cell_name}/{info.target}"
            found[name] = _progress(name, run, info)
        except (OSError, ValueError, ValidationError):
            continue
    return [found.get(label(cell), CellProgress(label(cell), Phase.WAITING)) for cell in cells]
