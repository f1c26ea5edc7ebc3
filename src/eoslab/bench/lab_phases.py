"""Where a one-command run's time and CPU went, phase by phase (issue 35's "measured floor").

A :class:`CpuSampler` reads the machine's busy CPU time twice a second while `make lab` (or
`make conformance`) runs; :func:`phases` cuts the run at what its night folder recorded — the
first run's start, the last run's end, the last verdict — and gives each phase its wall time,
its busy CPU-seconds and its **floor**: those CPU-seconds over the machine's cores, the least
wall time any schedule of the same work could take on this machine. A phase whose floor is near
its wall time was CPU-bound: lanes or any other reordering cannot make it shorter, only less
work can.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from pathlib import Path
from types import TracebackType

import psutil

from eoslab.rundir import RunDir

SAMPLE_S = 0.5
CPU_BOUND_SHARE = 0.85
"""A phase whose floor is at least this share of its wall time is called CPU-bound."""


def busy_cpu_s() -> float:
    """The machine's busy CPU-seconds since boot (every core; idle and I/O wait left out)."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


class CpuSampler:
    """The machine's cumulative busy CPU time, sampled on a thread while the block runs."""

    def __init__(self, interval_s: float = SAMPLE_S) -> None:
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="cpu-sampler", daemon=True)

    def _sample(self) -> None:
        while True:
            self.samples.append((time.time(), busy_cpu_s()))
            if self._stop.wait(self.interval_s):
                self.samples.append((time.time(), busy_cpu_s()))
                return

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    def busy_at(self, when: float) -> float:
        """Busy CPU-seconds since boot at ``when`` (epoch seconds), linear between samples."""
        times = [sample[0] for sample in self.samples]
        i = bisect.bisect_left(times, when)
        if i == 0:
            return self.samples[0][1]
        if i == len(self.samples):
            return self.samples[-1][1]
        (t0, b0), (t1, b1) = self.samples[i - 1], self.samples[i]
        return b0 + (b1 - b0) * (when - t0) / (t1 - t0) if t1 > t0 else b1

    def busy_between(self, begin: float, end: float) -> float:
        return max(0.0, self.busy_at(end) - self.busy_at(begin))


def phase(
    name: str, begin: float, end: float, sampler: CpuSampler, cores: int
) -> dict[str, object]:
    """One phase: its wall time, its busy CPU-seconds, its floor, whether it was CPU-bound."""
    seconds = max(0.0, end - begin)
    busy = sampler.busy_between(begin, end)
    return {
        "phase": name,
        "seconds": round(seconds, 1),
        "busy_cpu_s": round(busy, 1),
        "floor_s": round(busy / cores, 1),
        "cpu_bound": seconds > 0 and busy / cores >= CPU_BOUND_SHARE * seconds,
    }


def run_windows(night: Path | None) -> list[tuple[float, float, float]]:
    """Each checked run of a night folder: its start, its end and its verdict (epoch seconds)."""
    windows = []
    for path in sorted(night.glob("*/run.json")) if night else []:
        run = RunDir(path.parent)
        info = run.read_info()
        if info.ended_ms is not None and run.verdict_json.is_file():
            checked_ms = run.read_verdict().checked_ms
            windows.append((info.started_ms / 1000, info.ended_ms / 1000, checked_ms / 1000))
    return windows


def phases(
    windows: list[tuple[float, float, float]],
    begin: float,
    end: float,
    sampler: CpuSampler,
    cores: int = os.cpu_count() or 1,
) -> dict[str, object]:
    """The run from ``begin`` to ``end`` (epoch seconds) cut at its runs' ``windows``
    (:func:`run_windows`), each phase with its floor, and the whole run's floor; the runs' own
    seconds summed (what one lane waits for them one after the other)."""
    whole = phase("whole run", begin, end, sampler, cores)
    if not windows:
        return {"cores": cores, "whole": whole, "phases": []}
    started, ended, checked = (
        min(w[0] for w in windows),
        max(w[1] for w in windows),
        max(w[2] for w in windows),
    )
    edges = [
        ("lab up, Airflow, the first run starting", begin, started),
        ("the runs (checks beside them as runs end)", started, ended),
        ("checks after the last run", ended, checked),
        ("report and lab down", checked, end),
    ]
    return {
        "cores": cores,
        "whole": whole,
        "runs_s_summed": round(sum(w[1] - w[0] for w in windows), 1),
        "phases": [phase(name, a, b, sampler, cores) for name, a, b in edges],
    }
