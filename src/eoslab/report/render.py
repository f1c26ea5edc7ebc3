"""Write the reports: per run, per nightly matrix, and the trend over nights.

Layout under the reports root (EOSLAB_REPORTS_DIR, default `reports/` in the checkout)::

    reports/index.html                 the trend: conforming cells, flaky cells, run time per night
    reports/runs/<run_id>/             one run: index.html, summary.json, junit.xml
    reports/nightly/<name>/            one matrix: index.html, summary.json, junit.xml

Every index.html is self-contained (CSS and plots inline); links to Data Docs, logs and run
files are relative, so a reports folder copied with its runs stays browsable.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from eoslab.probe.every_flow import FlowSummary
from eoslab.report.history import (
    HISTORY_NIGHTS,
    FlakyCell,
    Night,
    NightSquare,
    flaky_cells,
    read_nights,
    strip,
    summary_files,
    window,
)
from eoslab.report.junit import junit_xml
from eoslab.report.outcome import (
    HALVES,
    NOT_RECORDED,
    RunOutcome,
    Status,
    latest_per_cell,
    load_outcome,
)
from eoslab.rundir import RunDir, VerdictStatus
from eoslab.scenarios.catalogue import ScenarioError, find_scenario
from eoslab.scenarios.schema import BugReference
from eoslab.settings import lab_dir, reports_root

ANOMALY_EXAMPLE_COLUMNS = 8


def _templates() -> Environment:
    environment = Environment(
        loader=PackageLoader("eoslab.report", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["rounded"] = _rounded
    return environment


def _rounded(value: Any) -> Any:
    """Figures as people read them: floats to two decimals, inside dicts and lists too."""
    if isinstance(value, float):
        return round(value, 2)
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return value


def _link(target: str | Path | None, page_dir: Path) -> str | None:
    """A relative link from a report page to a file on disk (None stays None)."""
    if not target:
        return None
    return os.path.relpath(Path(target), page_dir)


def _matrix(outcomes: list[RunOutcome], page_dir: Path, root: Path) -> dict[str, Any]:
    """Rows of scenarios, columns of targets; each cell a status and a link to its run page."""
    targets = sorted({o.target for o in outcomes})
    cells = {
        o.cell: {
            "status": o.status.value,
            "css": o.status.name.lower(),
            "href": _link(root / "runs" / o.run_id / "index.html", page_dir),
            "title": o.mismatch_message() or "every check as expected",
        }
        for o in outcomes
    }
    scenarios = sorted({o.label for o in outcomes})
    return {
        "targets": targets,
        "rows": [(s, [cells.get((s, t)) for t in targets]) for s in scenarios],
    }


def _write(out_dir: Path, html: str, summary: dict[str, Any], junit: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    (out_dir / "junit.xml").write_text(junit + "\n")
    index = out_dir / "index.html"
    index.write_text(html)
    return index


def _anomaly_rows(outcome: RunOutcome) -> list[dict[str, Any]]:
    """Anomaly checks that saw something, with their example rows (a few columns each)."""
    rows = []
    for check in outcome.checks:
        if check["observed"] and not check["name"].startswith("errors."):
            examples = check.get("examples") or []
            columns = list(examples[0])[:ANOMALY_EXAMPLE_COLUMNS] if examples else []
            rows.append({**check, "columns": columns})
    return rows


def write_run_report(run_dir: Path, reports: Path | None = None) -> Path:
    """reports/runs/<run_id>/{index.html,summary.json,junit.xml}; returns index.html."""
    from eoslab.report import plots  # matplotlib, pandas: seconds to import; not for every command

    root = reports or reports_root()
    outcome = load_outcome(run_dir)
    page_dir = root / "runs" / outcome.run_id
    run = RunDir(run_dir)
    links = {
        "GX Data Docs": _link(outcome.data_docs, page_dir),
        "run.json": _link(run.run_json, page_dir),
        "verdict.json": _link(run.verdict_json, page_dir) if run.verdict_json.is_file() else None,
        "metrics.json": _link(run.metrics_json, page_dir) if run.metrics_json.is_file() else None,
        "faults.jsonl": _link(run.faults_jsonl, page_dir) if run.faults_jsonl.is_file() else None,
        "anomaly tables": _link(run.anomalies_dir, page_dir)
        if run.anomalies_dir.is_dir()
        else None,
        "lab logs": _link(lab_dir() / "logs", page_dir),
    }
    html = (
        _templates()
        .get_template("run.html.j2")
        .render(
            outcome=outcome,
            halves=HALVES,
            matrix=_matrix([outcome], page_dir, root),
            anomalies=_anomaly_rows(outcome),
            figure=plots.run_figure_svg(run.path),
            consumer_figure=plots.consumer_figure_svg(run.path),
            anomaly_map=plots.anomaly_map_svg(run.path),
            links={name: href for name, href in links.items() if href},
            bug=scenario_bug(outcome.scenario),
            generated=_now(),
        )
    )
    return _write(page_dir, html, outcome.to_json(), junit_xml(outcome.run_id, [outcome]))


def scenario_bug(name: str) -> BugReference | None:
    """The public bug a catalogue scenario shows (None: none, or not a catalogue scenario)."""
    try:
        return find_scenario(name).bug
    except ScenarioError:
        return None


@dataclass(frozen=True)
class CellRow:
    """A row of the nightly page's cells table: the outcome, its timeline (None: no data),
    its history strip with a link per night, and whether it is flaky."""

    outcome: RunOutcome
    anchor: str
    """The row's id: the strips of later nights link to it."""
    timeline: str | None
    squares: list[tuple[NightSquare, str | None]]
    """Oldest night first, each with the link to that night's row (None: no page)."""
    flaky: FlakyCell | None


def _anchor(cell: tuple[str, str]) -> str:
    return f"cell-{cell[0]}--{cell[1]}"


def _cell_rows(
    outcomes: list[RunOutcome], nights: list[Night], flaky: list[FlakyCell], page_dir: Path
) -> list[CellRow]:
    from eoslab.report import plots  # matplotlib, pandas: seconds to import; not for every command

    flaky_by_cell = {(f.cell, f.target): f for f in flaky}
    rows = []
    for outcome in outcomes:
        anchor = _anchor(outcome.cell)
        squares = [
            (square, f"{href}#{anchor}" if (href := _link(square.index, page_dir)) else None)
            for square in strip(outcome.cell, nights)
        ]
        rows.append(
            CellRow(
                outcome=outcome,
                anchor=anchor,
                timeline=plots.timeline_svg(Path(outcome.run_dir)),
                squares=squares,
                flaky=flaky_by_cell.get(outcome.cell),
            )
        )
    return rows


def write_nightly_report(
    run_dirs: list[Path],
    name: str | None = None,
    reports: Path | None = None,
    probe_diffs: list[FlowSummary] | None = None,
    history_nights: int = HISTORY_NIGHTS,
) -> Path:
    """One matrix report over the given runs (the last run of each cell counts), with the
    night's probe diffs when there are any, plus every run's own page and the trend index;
    returns the matrix's index.html. The matrix conforms when every cell does and every probe
    flow does. Each cell shows its timeline and its history strip over the last
    ``history_nights`` nights the reports folder keeps (tonight included); the flaky ones
    (:func:`eoslab.report.history.is_flaky`) are flagged, and listed in summary.json."""
    root = reports or reports_root()
    name = name or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    outcomes = latest_per_cell([load_outcome(Path(d)) for d in run_dirs])
    for outcome in outcomes:
        write_run_report(Path(outcome.run_dir), root)
    page_dir = root / "nightly" / name
    tonight = Night(name, {o.cell: o.status for o in outcomes}, page_dir / "index.html")
    nights = window(read_nights(root), tonight, history_nights)
    flaky = flaky_cells([o.cell for o in outcomes], nights)
    summary = {
        "name": name,
        "generated": _now(),
        "cells": len(outcomes),
        "conforming": sum(o.status is Status.CONFORMS for o in outcomes),
        "invalid": sum(o.status is Status.INVALID for o in outcomes),
        "conforms": bool(outcomes)
        and all(o.status is Status.CONFORMS for o in outcomes)
        and all(flow.conforms for flow in probe_diffs or []),
        "probe_diffs": {
            "flows": len(probe_diffs or []),
            "conforming": sum(flow.conforms for flow in probe_diffs or []),
        },
        "run_time_s": _span_s(outcomes),
        "history_nights": [night.name for night in nights],
        "flaky": [cell.to_json() for cell in flaky],
        "versions": versions_tested(outcomes),
        "outcomes": [
            {
                "scenario": o.scenario,
                "mode": o.mode,
                "client": o.client,
                "client_ran": o.client_ran,
                "group_protocol": o.group_protocol,
                "target": o.target,
                "status": o.status.value,
                "run_id": o.run_id,
                "run_dir": o.run_dir,
                "message": o.mismatch_message(),
                "duration_s": o.duration_s,
            }
            for o in outcomes
        ],
    }
    html = (
        _templates()
        .get_template("nightly.html.j2")
        .render(
            summary=summary,
            cells=_cell_rows(outcomes, nights, flaky, page_dir),
            probe_diffs=probe_diffs or [],
            matrix=_matrix(outcomes, page_dir, root),
            trend_href=_link(root / "index.html", page_dir),
            generated=summary["generated"],
        )
    )
    index = _write(page_dir, html, summary, junit_xml(f"eoslab nightly {name}", outcomes))
    write_trend(root)
    return index


def versions_tested(outcomes: list[RunOutcome]) -> dict[str, list[str]]:
    """What the night tested, as its runs recorded it: per target what it ran (the Kafka
    release, the reference broker's rule sets), and every client the roles ran
    (``librdkafka:2.16.0``, ``java:3.9.2``, ``franz-go:v1.22.2``)."""
    tested: dict[str, set[str]] = {}
    for outcome in outcomes:
        tested.setdefault(outcome.target, set()).add(outcome.broker_version or NOT_RECORDED)
    clients = {o.client_ran for o in outcomes}
    return {
        **{target: sorted(ran) for target, ran in sorted(tested.items())},
        "clients": sorted(clients) or [NOT_RECORDED],
    }


def exit_code(summary: dict[str, Any]) -> int:
    """What a command reporting a matrix exits with: 3 when a cell is invalid, else 2 when one
    does not conform or has no verdict, else 0 (:attr:`VerdictStatus.exit_code`)."""
    if summary.get("invalid"):
        return VerdictStatus.INVALID.exit_code
    if not summary["conforms"]:
        return VerdictStatus.DOES_NOT_CONFORM.exit_code
    return VerdictStatus.CONFORMS.exit_code


def read_summary(index: Path) -> dict[str, Any]:
    """The summary.json beside a report's index.html."""
    return json.loads((index.parent / "summary.json").read_text())


def write_trend(reports: Path | None = None) -> Path:
    """reports/index.html: every nightly matrix, newest first (with its flaky cells), and the
    trend plot."""
    from eoslab.report import plots  # matplotlib, pandas: seconds to import; not for every command

    root = reports or reports_root()
    nights = []
    for summary_file in summary_files(root):
        summary = json.loads(summary_file.read_text())
        nights.append(
            {
                **summary,
                "href": _link(summary_file.parent / "index.html", root),
                "flaky_cells": [FlakyCell.from_json(f) for f in summary.get("flaky", [])],
            }
        )
    html = (
        _templates()
        .get_template("trend.html.j2")
        .render(nights=nights[::-1], figure=plots.trend_figure_svg(nights), generated=_now())
    )
    root.mkdir(parents=True, exist_ok=True)
    index = root / "index.html"
    index.write_text(html)
    return index


def _span_s(outcomes: list[RunOutcome]) -> float | None:
    """Wall time from the first run's start to the last verdict (or run end, unchecked)."""
    starts = [o.started_ms for o in outcomes if o.started_ms is not None]
    ends = [
        max(t for t in (o.ended_ms, o.checked_ms) if t is not None)
        for o in outcomes
        if o.ended_ms is not None or o.checked_ms is not None
    ]
    return (max(ends) - min(starts)) / 1000 if starts and ends else None


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


def write_bisect_report(name: str, summary: dict[str, Any], reports: Path | None = None) -> Path:
    """reports/bisect/<name>/{index.html,summary.json}: a bisection's cells (each with its run
    report) and its answer; returns index.html."""
    root = reports or reports_root()
    page_dir = root / "bisect" / name
    steps = []
    for step in summary["steps"]:
        href = None
        if step["run_dir"] and (Path(step["run_dir"]) / "run.json").is_file():
            href = _link(write_run_report(Path(step["run_dir"]), root), page_dir)
        steps.append({**step, "href": href})
    html = (
        _templates()
        .get_template("bisect.html.j2")
        .render(summary={**summary, "steps": steps}, generated=_now())
    )
    page_dir.mkdir(parents=True, exist_ok=True)
    (page_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    index = page_dir / "index.html"
    index.write_text(html)
    return index
