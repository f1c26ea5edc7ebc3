"""``eoslab bisect``: which release of a client fixed the bug a scenario shows — the answer a
user needs ("which version must we upgrade to?").

A scenario about a client bug expects, by default, what a client *without* the bug does, and
names the affected releases in ``expected.clients``. Bisect runs the scenario on releases of a
range (``java:2.7.0..3.9.1``: those the registry lists) judged by the default expectations
(:func:`eoslab.scenarios.executor.plan`'s ``as_fixed``), and reports the first release where it
conforms and the last where it does not. It assumes the bug, once fixed, stays fixed.

The search (:func:`search`): the range's two ends first (the first must not conform, the last
must), then the newest patch of each minor release between them, bisected (a fix lands in a
minor and is often back-ported to the previous one's patches), then every release between the
last one known broken and the first known fixed, bisected. Each step is a real cell, run and
checked, with its run directory under ``runs/bisect/<scenario>-<target>-<range>/``: a bisection
started again reuses the verdicts already there (resumable), and ``max_steps`` bounds the cells
it runs. An invalid cell (a fault that did not take effect) or one that could not run stops
the bisection: it cannot say which side that release is on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from eoslab.clients import ClientRef
from eoslab.rundir import RunDir, RunDirError, VerdictStatus
from eoslab.workload.drivers.releases import version_key


class Side(StrEnum):
    FIXED = "conforms"
    BROKEN = "does not conform"
    UNKNOWN = "unknown"
    """Invalid, or could not run: no side."""


@dataclass(frozen=True)
class Step:
    release: ClientRef
    side: Side
    detail: str
    """The cell's verdict line, or why it has no side."""
    run_dir: str | None = None
    reused: bool = False
    """Judged by a run directory an earlier bisection left (not run again)."""


@dataclass
class Bisection:
    releases: list[ClientRef]
    steps: list[Step] = field(default_factory=list)
    first_fixed: ClientRef | None = None
    last_broken: ClientRef | None = None
    conclusion: str = ""

    def to_json(self) -> dict[str, object]:
        """summary.json's body: every cell judged, ascending, and the answer."""
        return {
            "releases": [str(r) for r in self.releases],
            "steps": [
                {
                    "release": str(s.release),
                    "side": s.side.value,
                    "detail": s.detail,
                    "run_dir": s.run_dir,
                    "reused": s.reused,
                }
                for s in self.steps
            ],
            "first_fixed": None if self.first_fixed is None else str(self.first_fixed),
            "last_broken": None if self.last_broken is None else str(self.last_broken),
            "found": self.found,
            "conclusion": self.conclusion,
        }

    @property
    def found(self) -> bool:
        """The boundary is exact: the first fixed release is the one after the last broken."""
        if self.first_fixed is None or self.last_broken is None:
            return False
        index = self.releases.index(self.first_fixed)
        return index > 0 and self.releases[index - 1] == self.last_broken


Judge = Callable[[ClientRef], Step]


def newest_patches(releases: list[ClientRef]) -> list[int]:
    """The index of the newest patch of each minor release (``2.7.2`` for 2.7.x)."""
    newest: dict[tuple[int, ...], int] = {}
    for index, release in enumerate(releases):
        newest[version_key(release.version)[:2]] = index
    return sorted(newest.values())


def search(
    releases: list[ClientRef],
    judge: Judge,
    max_steps: int,
    known: Callable[[ClientRef], Step | None] = lambda _: None,
) -> Bisection:
    """Bisect ``releases`` (ascending) with ``judge`` (one cell a release, run), at most
    ``max_steps`` of them; ``known`` gives a release's verdict an earlier bisection left, free."""
    result = Bisection(releases)
    judged: dict[int, Side] = {}
    ran = 0

    def side(index: int) -> Side | None:
        nonlocal ran
        if index in judged:
            return judged[index]
        step = known(releases[index])
        if step is None:
            if ran >= max_steps:
                return None
            step = judge(releases[index])
            ran += 1
        result.steps.append(step)
        judged[index] = step.side
        return step.side

    def conclude(text: str) -> Bisection:
        fixed = [i for i, s in judged.items() if s is Side.FIXED]
        broken = [i for i, s in judged.items() if s is Side.BROKEN]
        result.first_fixed = releases[min(fixed)] if fixed else None
        result.last_broken = releases[max(broken)] if broken else None
        result.steps.sort(key=lambda s: version_key(s.release.version))
        result.conclusion = text
        return result

    for index, wanted in ((0, Side.BROKEN), (len(releases) - 1, Side.FIXED)):
        seen = side(index)
        if seen is None:
            return conclude(f"stopped after {max_steps} cells (--max-steps)")
        if seen is Side.UNKNOWN:
            return conclude(f"{releases[index]} has no verdict: the bisection stops there")
        if seen is not wanted:
            where = "first" if index == 0 else "last"
            return conclude(
                f"the range's {where} release {releases[index]} {seen.value}: no fix in it"
            )
    broken, fixed = 0, len(releases) - 1
    for candidates in (newest_patches(releases), list(range(len(releases)))):
        while inside := [i for i in candidates if broken < i < fixed]:
            middle = inside[len(inside) // 2]
            seen = side(middle)
            if seen is None:
                return conclude(f"stopped after {max_steps} cells (--max-steps)")
            if seen is Side.UNKNOWN:
                return conclude(f"{releases[middle]} has no verdict: the bisection stops there")
            if seen is Side.FIXED:
                fixed = middle
            else:
                broken = middle
    return conclude(
        f"first release that conforms: {releases[fixed]} (last that does not: {releases[broken]})"
    )


def folder_name(scenario: str, target: str, low: ClientRef, high: ClientRef) -> str:
    """Where a bisection's cells live, under ``runs/bisect/``."""
    return f"{scenario}-{target}-{low.family}-{low.version}..{high.version}"


def existing_step(folder: Path, release: ClientRef) -> Step | None:
    """A verdict an earlier bisection left for ``release`` in ``folder`` (None: none)."""
    for run_dir in sorted(folder.glob("*"), reverse=True):
        run = RunDir(run_dir)
        try:
            info = run.read_info()
            if info.client_version != str(release) or not run.verdict_json.is_file():
                continue
            verdict = run.read_verdict()
        except (OSError, RunDirError):
            continue
        side = {
            VerdictStatus.CONFORMS: Side.FIXED,
            VerdictStatus.DOES_NOT_CONFORM: Side.BROKEN,
        }.get(verdict.status, Side.UNKNOWN)
        return Step(release, side, str(verdict.status), str(run_dir), reused=True)
    return None
