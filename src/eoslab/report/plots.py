"""Throughput and latency over a run, with the nemesis' fault windows drawn on them.

Drawn from the history (acks per second by ``ack_ms``, latency of acked sends by ``send_ms``)
and ``faults.jsonl`` (a window from each ``start`` to its ``end``, a line for an ``instant``),
on the run's own clock: seconds since its first send. Figures are inline SVG, so a report
stays one self-contained file.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.dataset as ds
from matplotlib import rc_context
from matplotlib.figure import Figure

from eoslab.fault_events import FaultPhase, read_events
from eoslab.rundir import RunDir

FAULT_COLOUR = "#d62728"
BINS = 60
MIN_BIN_S = 0.1


@dataclass(frozen=True)
class FaultWindow:
    kind: str
    target: str
    start_ms: int
    end_ms: int | None  # None: an instant (a kill, say)

    @property
    def label(self) -> str:
        return f"{self.kind} {self.target}" if self.target else self.kind


def fault_windows(faults_jsonl: Path) -> list[FaultWindow]:
    """What the nemesis did, from its typed events: each ``start`` paired with the ``end`` of
    the same step and target (two steps of one kind on one target may overlap), an
    ``instant`` a line; an unpaired start lasts to the end of the run (drawn to the plot's
    edge). Steps that were skipped or failed did nothing, and are not drawn."""
    windows: list[FaultWindow] = []
    open_starts: dict[tuple[int | None, str, str], int] = {}
    for event in read_events(faults_jsonl):
        kind, target = event.kind, event.target or ""
        key = (event.step, kind, target)
        if event.phase is FaultPhase.START:
            open_starts[key] = event.ts_ms
        elif event.phase is FaultPhase.END and key in open_starts:
            windows.append(FaultWindow(kind, target, open_starts.pop(key), event.ts_ms))
        elif event.phase is FaultPhase.INSTANT:
            windows.append(FaultWindow(kind, target, event.ts_ms, None))
    windows += [
        FaultWindow(kind, target, start, -1) for (_, kind, target), start in open_starts.items()
    ]
    return sorted(windows, key=lambda w: w.start_ms)


def _history(history_dir: Path) -> dict[str, np.ndarray] | None:
    files = sorted(history_dir.glob("*.parquet"))
    if not files:
        return None
    table = ds.dataset([str(f) for f in files], format="parquet").to_table(
        columns=["outcome", "send_ms", "ack_ms", "latency_ms"],
        filter=ds.field("outcome") == "ack",
    )
    if table.num_rows == 0:
        return None
    return {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}


def run_figure_svg(run_dir: Path) -> str | None:
    """The SVG of the run's throughput and latency, or None when it acked nothing."""
    run = RunDir(run_dir)
    history = _history(run.history_dir)
    if history is None:
        return None
    origin = int(history["send_ms"].min())
    ack_s = (history["ack_ms"].astype(np.int64) - origin) / 1000
    send_s = (history["send_ms"].astype(np.int64) - origin) / 1000
    end_s = float(max(ack_s.max(), send_s.max()))
    width_s = max(MIN_BIN_S, end_s / BINS)
    edges = np.arange(0, end_s + 2 * width_s, width_s)
    acks, _ = np.histogram(ack_s, bins=edges)

    figure = Figure(figsize=(9, 5))  # no pyplot: no global state, no GUI backend
    throughput, latency = figure.subplots(2, 1, sharex=True)
    throughput.step(edges[:-1], acks / width_s, where="post", color="#1f77b4")
    throughput.set_ylabel("acked records / s")
    latency.plot(send_s, history["latency_ms"], ".", markersize=2, color="#2ca02c")
    latency.set_ylabel("latency (ms)")
    latency.set_xlabel("seconds since the first send")
    for window in fault_windows(run.faults_jsonl):
        start = (window.start_ms - origin) / 1000
        for axis in (throughput, latency):
            if window.end_ms is None:
                axis.axvline(start, color=FAULT_COLOUR, linewidth=1)
            else:
                end = end_s if window.end_ms < 0 else (window.end_ms - origin) / 1000
                axis.axvspan(start, end, color=FAULT_COLOUR, alpha=0.15)
        throughput.annotate(
            window.label,
            (start, 1),
            xycoords=("data", "axes fraction"),
            fontsize=7,
            color=FAULT_COLOUR,
            va="top",
        )
    return _inline_svg(figure)


def trend_figure_svg(nights: list[dict[str, Any]]) -> str | None:
    """Conforming cells (against all cells) and run time per night, oldest first."""
    if not nights:
        return None
    figure = Figure(figsize=(9, 4))
    cells, seconds = figure.subplots(2, 1, sharex=True)
    names = [night["name"] for night in nights]
    cells.plot(names, [n["cells"] for n in nights], "o--", color="#999999", label="cells")
    cells.plot(names, [n["conforming"] for n in nights], "o-", color="#2ca02c", label="conforming")
    cells.set_ylabel("cells")
    cells.legend(loc="lower left", fontsize=8)
    seconds.bar(names, [n["run_time_s"] or 0 for n in nights], color="#1f77b4")
    seconds.set_ylabel("run time (s)")
    seconds.tick_params(axis="x", labelrotation=30, labelsize=7)
    return _inline_svg(figure)


def _inline_svg(figure: Figure) -> str:
    figure.tight_layout()
    out = io.StringIO()
    with rc_context({"svg.fonttype": "none"}):  # text stays text: smaller, searchable
        figure.savefig(out, format="svg")
    svg = out.getvalue()
    return svg[svg.index("<svg") :]  # drop the XML prolog: the SVG goes inline into HTML
