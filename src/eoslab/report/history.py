"""A cell's verdicts over the last nights, and which cells are flaky.

Read from the nightly summaries the reports folder keeps (``reports/nightly/<name>/
summary.json``, written by :func:`eoslab.report.render.write_nightly_report`): each night's
``outcomes`` name their cell (scenario, handler mode, client, group protocol → the cell name of
:func:`eoslab.rundir.cell_name`; and target) and its status. Nights are in name order, the
trend's order (night names are UTC times: ``20260101T000000``).

A cell's **history strip** is its status on each of the last :data:`HISTORY_NIGHTS` nights up
to and including the night being reported (older nights first): conforms, does not conform,
invalid, error (no verdict), or missing (the cell did not run that night).

A cell is **flaky** (:func:`is_flaky`) when, among the nights of its strip on which it ran, its
verdict changes between conforming and failing (does not conform, or invalid) at least twice.
Nights with no verdict (error) or on which it did not run count neither way.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from eoslab.report.outcome import Status
from eoslab.rundir import cell_name

HISTORY_NIGHTS = 14
"""How many nights a history strip shows, tonight included."""
FAILING = frozenset({Status.DOES_NOT_CONFORM, Status.INVALID})
"""The statuses that, beside a conforming night, make a cell flaky."""

CellKey = tuple[str, str]
"""(cell name, target): :attr:`eoslab.report.outcome.RunOutcome.cell`."""


def summary_files(root: Path) -> list[Path]:
    """Every nightly matrix's summary.json under the reports root, in name order."""
    return sorted((root / "nightly").glob("*/summary.json"))


@dataclass(frozen=True)
class Night:
    """One nightly matrix: each of its cells' status, and its page."""

    name: str
    statuses: dict[CellKey, Status]
    index: Path | None = None
    """The night's index.html; None when it has none."""

    @classmethod
    def from_summary(cls, summary: dict[str, Any], index: Path | None = None) -> Night:
        """A night from its summary.json (older summaries lack ``client`` and
        ``group_protocol``: the workload's own client, the classic protocol)."""
        statuses = {}
        for outcome in summary.get("outcomes", []):
            cell = cell_name(
                outcome["scenario"],
                outcome.get("mode"),
                outcome.get("client"),
                outcome.get("group_protocol") or "classic",
            )
            try:
                status = Status(outcome["status"])
            except ValueError:
                status = Status.ERROR
            statuses[(cell, outcome["target"])] = status
        return cls(name=summary["name"], statuses=statuses, index=index)


def read_nights(root: Path) -> list[Night]:
    """Every nightly matrix the reports root keeps, in name order."""
    nights = []
    for summary_file in summary_files(root):
        index = summary_file.parent / "index.html"
        summary = json.loads(summary_file.read_text())
        nights.append(Night.from_summary(summary, index if index.is_file() else None))
    return nights


def window(earlier: Iterable[Night], tonight: Night, nights: int = HISTORY_NIGHTS) -> list[Night]:
    """The nights a strip shows: the last ``nights`` up to tonight in name order, tonight last.
    An earlier night of tonight's name (a report written again) is tonight; nights whose names
    sort after tonight's are not shown."""
    before = sorted(
        (n for n in earlier if n.name < tonight.name),
        key=lambda n: n.name,
    )
    return [*before, tonight][-max(nights, 1) :]


@dataclass(frozen=True)
class NightSquare:
    """A cell on one night of its strip."""

    night: str
    status: Status | None
    """None: the cell did not run that night."""
    index: Path | None
    """That night's page, when it has one."""

    @property
    def css(self) -> str:
        """``conforms``, ``does_not_conform``, ``invalid``, ``error`` or ``missing``."""
        return "missing" if self.status is None else self.status.name.lower()

    @property
    def title(self) -> str:
        return f"{self.night}: {'not run' if self.status is None else self.status.value}"


def strip(cell: CellKey, nights: Sequence[Night]) -> list[NightSquare]:
    """One square per night of ``nights`` (oldest first): the cell's status that night."""
    return [NightSquare(n.name, n.statuses.get(cell), n.index) for n in nights]


def is_flaky(statuses: Iterable[Status | None]) -> bool:
    """Whether a cell flips back and forth between nights: among the nights it ran (``None``:
    it did not) and got a verdict (:attr:`~Status.ERROR` counts neither way), its verdict
    changes between conforming and failing (:data:`FAILING`: does not conform, or invalid) at
    least twice. One change is a regression (green, then red) or a fix (red, then green): the
    strip shows it, the badge does not cry wolf over it."""
    verdicts = [s is Status.CONFORMS for s in statuses if s is Status.CONFORMS or s in FAILING]
    return sum(a != b for a, b in itertools.pairwise(verdicts)) >= 2


@dataclass(frozen=True)
class FlakyCell:
    """A flaky cell, as the nightly summary.json lists it (``flaky``)."""

    cell: str
    """The cell name (scenario with its mode, group protocol and client)."""
    target: str
    conforming: int
    """Nights of the strip on which it conformed."""
    failing: int
    """Nights of the strip on which it did not conform or was invalid."""
    nights: int
    """The nights of the strip (ran or not)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FlakyCell:
        return cls(
            cell=data["cell"],
            target=data["target"],
            conforming=int(data["conforming"]),
            failing=int(data["failing"]),
            nights=int(data["nights"]),
        )

    @property
    def label(self) -> str:
        return f"{self.cell}/{self.target}"


def flaky_cells(cells: Iterable[CellKey], nights: Sequence[Night]) -> list[FlakyCell]:
    """The flaky ones among ``cells`` over ``nights`` (:func:`is_flaky`), in cell order."""
    flaky = []
    for cell in sorted(cells):
        statuses = [square.status for square in strip(cell, nights)]
        if is_flaky(statuses):
            flaky.append(
                FlakyCell(
                    cell=cell[0],
                    target=cell[1],
                    conforming=statuses.count(Status.CONFORMS),
                    failing=sum(s in FAILING for s in statuses),
                    nights=len(nights),
                )
            )
    return flaky
