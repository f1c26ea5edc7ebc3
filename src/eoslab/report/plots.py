"""Throughput and latency over a run, and its consumer half, with the nemesis' fault windows
drawn on them.

Drawn from the history (acks per second by ``ack_ms``, latency of acked sends by ``send_ms``),
the consumption ledger (processings per second by what they did to the sink, redeliveries, the
committed lag per partition, the group generations) and ``faults.jsonl`` (a window from each
``start`` to its ``end``, a line for an ``instant``), on the run's own clock: seconds since its
first send. Figures are inline SVG, so a report stays one self-contained file.

The run page's figures are drawn by matplotlib; the nightly page's per-cell timeline
(:func:`timeline_svg`) is a sparkline of the same series (:func:`acked_series`) and the same
fault spans (:func:`fault_spans`), written as a few SVG elements by hand: small, without
element ids (one per cell on a page), and fast for a matrix of many cells.
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from collections.abc import Callable
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
THROUGHPUT_COLOUR = "#1f77b4"
LATENCY_COLOUR = "#2ca02c"
GENERATION_COLOUR = "#7f7f7f"
MAX_LAG_LINES = 8
"""Partitions drawn one line each in the lag plot; more are drawn as their sum."""
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


def _columns(
    folder: Path, columns: list[str], where: ds.Expression | None = None
) -> dict[str, np.ndarray] | None:
    """The columns of a run-directory folder of Parquet files, None when it holds no row."""
    files = sorted(folder.glob("*.parquet"))
    if not files:
        return None
    table = ds.dataset([str(f) for f in files], format="parquet").to_table(
        columns=columns, filter=where
    )
    if table.num_rows == 0:
        return None
    return {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}


def _history(history_dir: Path) -> dict[str, np.ndarray] | None:
    return _columns(
        history_dir,
        ["outcome", "partition", "offset", "send_ms", "ack_ms", "latency_ms"],
        ds.field("outcome") == "ack",
    )


def _bins(end_s: float) -> tuple[np.ndarray, float]:
    """Bin edges over [0, end_s] and their width."""
    width_s = max(MIN_BIN_S, end_s / BINS)
    return np.arange(0, end_s + 2 * width_s, width_s), width_s


@dataclass(frozen=True)
class FaultSpan:
    """A :class:`FaultWindow` on a run's own clock (seconds since its first send)."""

    label: str
    start_s: float
    end_s: float | None
    """None: an instant; an unpaired start lasts to the end of the run."""


def fault_spans(faults_jsonl: Path, origin_ms: int, end_s: float) -> list[FaultSpan]:
    """The run's :func:`fault_windows` in seconds since ``origin_ms``; a window still open when
    the run ended lasts to ``end_s``."""
    spans = []
    for window in fault_windows(faults_jsonl):
        start = (window.start_ms - origin_ms) / 1000
        if window.end_ms is None:
            end = None
        else:
            end = end_s if window.end_ms < 0 else (window.end_ms - origin_ms) / 1000
        spans.append(FaultSpan(window.label, start, end))
    return spans


@dataclass(frozen=True, eq=False)
class AckedSeries:
    """A run's acknowledged sends on its own clock: acks per second in :data:`BINS` bins (by
    ack time), and each acked send's latency at its send time."""

    origin_ms: int
    """The first send: second 0."""
    end_s: float
    """The last send or ack."""
    edges: np.ndarray
    """Bin edges, seconds (one more than bins)."""
    width_s: float
    acks_per_s: np.ndarray
    """Acknowledged records per second, per bin."""
    send_s: np.ndarray
    latency_ms: np.ndarray

    def latency_quantile(self, q: float) -> np.ndarray:
        """Per bin, the ``q`` quantile of the latency of the sends made in it (NaN: none)."""
        which = np.digitize(self.send_s, self.edges) - 1
        out = np.full(len(self.edges) - 1, np.nan)
        for i in np.unique(which[(which >= 0) & (which < len(out))]):
            out[i] = float(np.quantile(self.latency_ms[which == i], q))
        return out


def acked_series(run_dir: Path) -> AckedSeries | None:
    """The run's :class:`AckedSeries`, or None when it acked nothing (or has no history)."""
    history = _history(RunDir(run_dir).history_dir)
    if history is None:
        return None
    origin = int(history["send_ms"].min())
    ack_s = (history["ack_ms"].astype(np.int64) - origin) / 1000
    send_s = (history["send_ms"].astype(np.int64) - origin) / 1000
    end_s = float(max(ack_s.max(), send_s.max()))
    edges, width_s = _bins(end_s)
    acks, _ = np.histogram(ack_s, bins=edges)
    return AckedSeries(
        origin_ms=origin,
        end_s=end_s,
        edges=edges,
        width_s=width_s,
        acks_per_s=acks / width_s,
        send_s=send_s,
        latency_ms=history["latency_ms"].astype(float),
    )


def _draw_faults(axes: list[Any], faults_jsonl: Path, origin: int, end_s: float) -> None:
    """The fault windows on every axis, labelled on the first."""
    for span in fault_spans(faults_jsonl, origin, end_s):
        for axis in axes:
            if span.end_s is None:
                axis.axvline(span.start_s, color=FAULT_COLOUR, linewidth=1)
            else:
                axis.axvspan(span.start_s, span.end_s, color=FAULT_COLOUR, alpha=0.15)
        axes[0].annotate(
            span.label,
            (span.start_s, 1),
            xycoords=("data", "axes fraction"),
            fontsize=7,
            color=FAULT_COLOUR,
            va="top",
        )


def run_figure_svg(run_dir: Path) -> str | None:
    """The SVG of the run's throughput and latency, or None when it acked nothing."""
    series = acked_series(run_dir)
    if series is None:
        return None
    figure = Figure(figsize=(9, 5))  # no pyplot: no global state, no GUI backend
    throughput, latency = figure.subplots(2, 1, sharex=True)
    throughput.step(series.edges[:-1], series.acks_per_s, where="post", color=THROUGHPUT_COLOUR)
    throughput.set_ylabel("acked records / s")
    latency.plot(series.send_s, series.latency_ms, ".", markersize=2, color=LATENCY_COLOUR)
    latency.set_ylabel("latency (ms)")
    latency.set_xlabel("seconds since the first send")
    _draw_faults(
        [throughput, latency], RunDir(run_dir).faults_jsonl, series.origin_ms, series.end_s
    )
    return _inline_svg(figure)


TIMELINE_WIDTH = 140
TIMELINE_THROUGHPUT_HEIGHT = 24
TIMELINE_LATENCY_HEIGHT = 14
TIMELINE_GAP = 2
TIMELINE_QUANTILE = 0.99


def timeline_svg(run_dir: Path) -> str | None:
    """A sparkline of the run for a matrix's cell, or None when it acked nothing: acked records
    per second (a step line, top band), the p99 latency of each bin's sends (bottom band; each
    band scaled to its own maximum), the fault windows shaded (``rect.fault-window``) and instant
    faults as lines (``line.fault-instant``), each with its label as a tooltip."""
    series = acked_series(run_dir)
    if series is None:
        return None
    span_s = float(series.edges[-1]) or 1.0
    height = TIMELINE_THROUGHPUT_HEIGHT + TIMELINE_GAP + TIMELINE_LATENCY_HEIGHT

    def x(seconds: float) -> float:
        return round(min(max(seconds, 0.0), span_s) / span_s * TIMELINE_WIDTH, 1)

    p99 = series.latency_quantile(TIMELINE_QUANTILE)
    spans = fault_spans(RunDir(run_dir).faults_jsonl, series.origin_ms, series.end_s)
    described = "; ".join(
        f"{s.label} at {s.start_s:.1f} s"
        if s.end_s is None
        else f"{s.label} {s.start_s:.1f}-{s.end_s:.1f} s"
        for s in spans
    )
    svg = ET.Element(
        "svg",
        {
            "xmlns": "http://www.w3.org/2000/svg",
            "class": "timeline",
            "width": str(TIMELINE_WIDTH),
            "height": str(height),
            "viewBox": f"0 0 {TIMELINE_WIDTH} {height}",
            "role": "img",
        },
    )
    ET.SubElement(svg, "title").text = (
        f"{series.end_s:.1f} s; acked records/s (max {np.max(series.acks_per_s):.0f}), "
        f"p99 latency (max {np.nanmax(p99):.0f} ms)"
        + (f"; faults: {described}" if described else "; no faults")
    )
    ET.SubElement(
        svg,
        "rect",
        {"width": str(TIMELINE_WIDTH), "height": str(height), "fill": "#fafafa"},
    )
    for span in spans:
        if span.end_s is None:
            shape = ET.SubElement(
                svg,
                "line",
                {
                    "class": "fault-instant",
                    "x1": str(x(span.start_s)),
                    "x2": str(x(span.start_s)),
                    "y1": "0",
                    "y2": str(height),
                    "stroke": FAULT_COLOUR,
                    "stroke-width": "1",
                },
            )
        else:
            shape = ET.SubElement(
                svg,
                "rect",
                {
                    "class": "fault-window",
                    "x": str(x(span.start_s)),
                    "y": "0",
                    "width": str(max(x(span.end_s) - x(span.start_s), 1.0)),
                    "height": str(height),
                    "fill": FAULT_COLOUR,
                    "fill-opacity": "0.2",
                },
            )
        ET.SubElement(shape, "title").text = span.label
    bands = (
        ("throughput", series.acks_per_s, 0, TIMELINE_THROUGHPUT_HEIGHT, THROUGHPUT_COLOUR),
        ("latency", p99, TIMELINE_THROUGHPUT_HEIGHT + TIMELINE_GAP, height, LATENCY_COLOUR),
    )
    for name, values, top, bottom, colour in bands:
        ET.SubElement(
            svg,
            "path",
            {
                "class": name,
                "d": _step_path(series.edges, values, x, top, bottom),
                "fill": "none",
                "stroke": colour,
                "stroke-width": "1",
            },
        )
    return ET.tostring(svg, encoding="unicode")


def _step_path(
    edges: np.ndarray,
    values: np.ndarray,
    x: Callable[[float], float],
    top: float,
    bottom: float,
) -> str:
    """An SVG path of ``values`` per bin as steps between ``edges``, scaled into the band from
    ``top`` (the maximum) to ``bottom`` (zero); a bin without a value (NaN) breaks the line."""
    peak = float(np.nanmax(values)) if np.any(~np.isnan(values)) else 0.0
    scale = (bottom - top) / peak if peak > 0 else 0.0
    parts: list[str] = []
    move = True
    for left, right, value in zip(edges[:-1], edges[1:], values, strict=True):
        if np.isnan(value):
            move = True
            continue
        y = round(bottom - value * scale, 1)
        parts.append(f"{'M' if move else 'L'}{x(float(left))},{y}L{x(float(right))},{y}")
        move = False
    return "".join(parts)


def consumer_figure_svg(run_dir: Path) -> str | None:
    """The SVG of the run's consumer half, or None when no consumer processed a record:
    processings per second by their effect on the sink, with redeliveries (a message processed
    again); the committed lag per partition (acknowledged records past the group's committed
    offset); the generations the group went through (a dashed line where a newer one first
    shows) and the fault windows."""
    run = RunDir(run_dir)
    history = _history(run.history_dir)
    processed = _columns(run.processed_dir, ["message_id", "effect", "generation", "processed_ms"])
    if history is None or processed is None:
        return None
    commits = _columns(
        run.commits_dir,
        ["partition", "offset", "generation", "committed_ms"],
        ds.field("error").is_null(),
    )
    origin = int(history["send_ms"].min())
    processed_s = (processed["processed_ms"].astype(np.int64) - origin) / 1000
    end_s = float(
        max(processed_s.max(), (history["ack_ms"].astype(np.int64) - origin).max() / 1000)
    )
    edges, width_s = _bins(end_s)

    figure = Figure(figsize=(9, 5))
    rate, lag = figure.subplots(2, 1, sharex=True)
    for effect in sorted(set(processed["effect"].tolist())):
        counts, _ = np.histogram(processed_s[processed["effect"] == effect], bins=edges)
        rate.step(edges[:-1], counts / width_s, where="post", label=effect)
    again = _repeats(processed["message_id"], processed["processed_ms"])
    if again.any():
        counts, _ = np.histogram(processed_s[again], bins=edges)
        rate.step(edges[:-1], counts / width_s, where="post", color="#000000", label="redelivered")
    rate.set_ylabel("processings / s")
    rate.legend(loc="upper right", fontsize=7)
    _draw_lag(lag, history, commits, origin, edges)
    lag.set_ylabel("committed lag (records)")
    lag.set_xlabel("seconds since the first send")
    _draw_generations([rate, lag], processed, commits, origin)
    _draw_faults([rate, lag], run.faults_jsonl, origin, end_s)
    return _inline_svg(figure)


def _repeats(message_ids: np.ndarray, processed_ms: np.ndarray) -> np.ndarray:
    """Which processings were of a message processed before (by time; foreign records, without
    a message id, never)."""
    seen: set[str] = set()
    repeat = np.zeros(len(message_ids), dtype=bool)
    for i in np.argsort(processed_ms, kind="stable"):
        message = message_ids[i]
        if message is None:
            continue
        repeat[i] = message in seen
        seen.add(message)
    return repeat


def _draw_lag(
    axis: Any,
    history: dict[str, np.ndarray],
    commits: dict[str, np.ndarray] | None,
    origin: int,
    edges: np.ndarray,
) -> None:
    """Per partition, at each bin edge: the end of the acknowledged log (the highest offset
    acknowledged by then, plus one) less the last successfully committed offset by then."""
    at_ms = origin + edges * 1000
    lags: dict[int, np.ndarray] = {}
    for partition in sorted(set(history["partition"].tolist())):
        mine = history["partition"] == partition
        acked = _last_by(
            history["ack_ms"][mine], history["offset"][mine] + 1, at_ms, running_max=True
        )
        committed = np.zeros(len(at_ms))
        if commits is not None:
            theirs = commits["partition"] == partition
            committed = _last_by(commits["committed_ms"][theirs], commits["offset"][theirs], at_ms)
        lags[partition] = np.maximum(acked - committed, 0)
    if len(lags) > MAX_LAG_LINES:
        axis.plot(edges, sum(lags.values()), label=f"all {len(lags)} partitions")
    else:
        for partition, values in lags.items():
            axis.plot(edges, values, label=f"partition {partition}")
    axis.legend(loc="upper right", fontsize=7)


def _last_by(
    ts_ms: np.ndarray, values: np.ndarray, at_ms: np.ndarray, *, running_max: bool = False
) -> np.ndarray:
    """At each of ``at_ms``: the value of the last event at or before it (0 before any), or,
    with ``running_max``, the largest value so far."""
    order = np.argsort(ts_ms.astype(np.int64), kind="stable")
    ts, vals = ts_ms.astype(np.int64)[order], values.astype(np.int64)[order]
    if running_max and len(vals):
        vals = np.maximum.accumulate(vals)
    index = np.searchsorted(ts, at_ms, side="right") - 1
    return np.where(index >= 0, vals[np.maximum(index, 0)] if len(vals) else 0, 0)


def _draw_generations(
    axes: list[Any],
    processed: dict[str, np.ndarray],
    commits: dict[str, np.ndarray] | None,
    origin: int,
) -> None:
    """A dashed line where each newer group generation (member epoch under KIP-848) first
    shows, in a processing or a commit; the first one is not marked."""
    times = [processed["processed_ms"]] + ([commits["committed_ms"]] if commits else [])
    generations = [processed["generation"]] + ([commits["generation"]] if commits else [])
    ts = np.concatenate([t.astype(np.int64) for t in times])
    gen = np.concatenate([g.astype(np.int64) for g in generations])
    newest = -1
    for i in np.argsort(ts, kind="stable"):
        if gen[i] <= newest:
            continue
        if newest >= 0:
            at = (ts[i] - origin) / 1000
            for axis in axes:
                axis.axvline(at, color=GENERATION_COLOUR, linestyle="--", linewidth=1)
            axes[-1].annotate(
                f"gen {gen[i]}",
                (at, 0),
                xycoords=("data", "axes fraction"),
                fontsize=7,
                color=GENERATION_COLOUR,
                va="bottom",
            )
        newest = int(gen[i])


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


NOT_ANOMALIES = frozenset({"indeterminate"})
"""Tables the checker writes beside the anomalies that are no anomaly (an unknown outcome)."""
ANOMALY_MARKERS = "oXs^vD*Ph"


@dataclass(frozen=True)
class AnomalyPlaces:
    """Where one anomaly's rows sit in the log: (partition, offset) of each row in the log, and
    how many rows have no offset (a lost record is nowhere in the log)."""

    name: str
    partitions: list[int]
    offsets: list[int]
    not_in_log: int

    @property
    def label(self) -> str:
        rows = len(self.offsets) + self.not_in_log
        nowhere = f", {self.not_in_log} not in the log" if self.not_in_log else ""
        return f"{self.name} ({rows}{nowhere})"


def anomaly_places(run_dir: Path) -> list[AnomalyPlaces]:
    """Every anomaly table of the checker with rows, in name order (``indeterminate`` is an
    outcome, not an anomaly: left out)."""
    anomalies = RunDir(run_dir).anomalies_dir
    if not anomalies.is_dir():
        return []
    found = []
    for folder in sorted(p for p in anomalies.iterdir() if p.is_dir()):
        if folder.name in NOT_ANOMALIES or not any(folder.rglob("*.parquet")):
            continue
        table = ds.dataset(folder, format="parquet")
        if not {"partition", "offset"} <= set(table.schema.names):
            continue
        rows = table.to_table(columns=["partition", "offset"]).to_pylist()
        placed = [r for r in rows if r["offset"] is not None and r["partition"] is not None]
        if rows:
            found.append(
                AnomalyPlaces(
                    name=folder.name,
                    partitions=[int(r["partition"]) for r in placed],
                    offsets=[int(r["offset"]) for r in placed],
                    not_in_log=len(rows) - len(placed),
                )
            )
    return found


def anomaly_map_svg(run_dir: Path) -> str | None:
    """Where the anomalies sit: each anomalous row at its offset (x) in its partition (y), one
    marker per anomaly; None when the checker found none."""
    places = anomaly_places(run_dir)
    if not places:
        return None
    figure = Figure(figsize=(9, 2.6))
    axes = figure.subplots()
    for index, anomaly in enumerate(places):
        lane = (index + 1) / (len(places) + 1) - 0.5  # each anomaly in a lane of its partition
        axes.scatter(
            anomaly.offsets,
            [p + lane * 0.6 for p in anomaly.partitions],
            s=14,
            marker=ANOMALY_MARKERS[index % len(ANOMALY_MARKERS)],
            label=anomaly.label,
        )
    partitions = sorted({p for a in places for p in a.partitions}) or [0]
    axes.set_yticks(partitions)
    axes.set_ylim(min(partitions) - 0.6, max(partitions) + 0.6)
    axes.set_ylabel("partition")
    axes.set_xlabel("offset")
    axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return _inline_svg(figure)


def _inline_svg(figure: Figure) -> str:
    figure.tight_layout()
    out = io.StringIO()
    with rc_context({"svg.fonttype": "none"}):  # text stays text: smaller, searchable
        figure.savefig(out, format="svg")
    svg = out.getvalue()
    return svg[svg.index("<svg") :]  # drop the XML prolog: the SVG goes inline into HTML
