"""The nightly page's per-cell timeline, history strip and flaky flag: the pure logic
(eoslab.report.history, the sparkline of eoslab.report.plots) and the page and summary.json
built over several nights of hand-written run directories."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from eoslab.report.command import app as report_app
from eoslab.report.history import (
    FlakyCell,
    Night,
    flaky_cells,
    is_flaky,
    read_nights,
    strip,
    window,
)
from eoslab.report.outcome import Status
from eoslab.report.plots import TIMELINE_WIDTH, acked_series, timeline_svg
from eoslab.report.render import read_summary, write_nightly_report
from eoslab.runtime.versions import broker_version
from synthetic_runs import START_MS, make_run

C, D, INV, E = Status.CONFORMS, Status.DOES_NOT_CONFORM, Status.INVALID, Status.ERROR
FLIPPING = ("baseline", "kafka")
STABLE = ("baseline", "refbroker")
NIGHTS = ("20260101T000000", "20260102T000000", "20260103T000000")


# The pure logic


@pytest.mark.parametrize(
    ("statuses", "flaky"),
    [
        ([C, D, C], True),
        ([C, INV, C, C], True),  # invalid counts as failing
        ([D, None, C, None, D], True),  # nights it did not run count neither way
        ([C, C, D], False),  # one change: a regression, not flakiness
        ([D, D, C], False),  # a fix
        ([C, C, C], False),
        ([D, D, INV], False),  # always failing: broken, not flaky
        ([C, E, C], False),  # no verdict counts neither way
        ([E, D, None], False),
        ([None, None], False),
        ([], False),
    ],
)
def test_a_cell_is_flaky_when_its_verdict_flips_back_and_forth_within_the_window(
    statuses: list[Status | None], flaky: bool
) -> None:
    assert is_flaky(statuses) is flaky


def _night(name: str, **cells: Status) -> Night:
    """A night whose cells are named target=status, all of the ``baseline`` scenario."""
    return Night(name, {("baseline", target): status for target, status in cells.items()})


def test_the_window_is_the_last_nights_up_to_tonight_which_replaces_its_namesake() -> None:
    earlier = [_night(n, kafka=C) for n in ("d3", "d1", "d5", "d2", "d4")]
    tonight = _night("d4", kafka=D)
    assert [n.name for n in window(earlier, tonight, 3)] == ["d2", "d3", "d4"]
    assert window(earlier, tonight, 3)[-1] is tonight  # not the d4 on disk
    assert [n.name for n in window(earlier, tonight, 14)] == ["d1", "d2", "d3", "d4"]
    assert window(earlier, tonight, 1) == [tonight]
    assert window([], tonight) == [tonight]


def test_a_strip_has_a_square_per_night_and_only_the_flipping_cell_is_flaky() -> None:
    nights = [
        _night("n1", kafka=C, refbroker=C),
        _night("n2", kafka=D, refbroker=C, kafka4=E),
        _night("n3", refbroker=C),
        _night("n4", kafka=C, refbroker=C, kafka4=INV),
    ]
    squares = strip(FLIPPING, nights)
    assert [s.css for s in squares] == ["conforms", "does_not_conform", "missing", "conforms"]
    assert [s.title for s in squares] == [
        "n1: conforms",
        "n2: does not conform",
        "n3: not run",
        "n4: conforms",
    ]
    assert [s.css for s in strip(("baseline", "kafka4"), nights)] == [
        "missing",
        "error",
        "missing",
        "invalid",
    ]
    cells = [FLIPPING, STABLE, ("baseline", "kafka4")]
    flaky = flaky_cells(cells, nights)
    assert flaky == [FlakyCell("baseline", "kafka", conforming=2, failing=1, nights=4)]
    assert [FlakyCell.from_json(json.loads(json.dumps(f.to_json()))) for f in flaky] == flaky
    assert flaky_cells(cells, nights[2:]) == []  # n3, n4: conforms, or did not run


def test_a_night_reads_its_cells_from_summary_json_older_ones_too() -> None:
    night = Night.from_summary(
        {
            "name": "old",
            "outcomes": [  # no client, no group_protocol: written before they existed
                {"scenario": "baseline", "mode": None, "target": "kafka", "status": "conforms"},
                {
                    "scenario": "consumer-crash-before-commit",
                    "mode": "dedup-table",
                    "client": None,
                    "group_protocol": "consumer",
                    "target": "kafka4",
                    "status": "does not conform",
                },
                {"scenario": "x", "mode": None, "target": "kafka", "status": "on fire"},
            ],
        }
    )
    assert night.statuses == {
        ("baseline", "kafka"): C,
        ("consumer-crash-before-commit.dedup-table.kip848", "kafka4"): D,
        ("x", "kafka"): E,
    }


def test_the_timeline_has_throughput_latency_and_the_fault_windows(tmp_path: Path) -> None:
    run = make_run(tmp_path, "lost-acks", "kafka")
    series = acked_series(run)
    assert series is not None
    assert series.origin_ms == START_MS
    p99 = series.latency_quantile(0.99)
    assert np.nanmax(p99) == pytest.approx(25.0)
    assert math.isnan(p99[-1])  # the last bin: after the last send
    assert series.acks_per_s.sum() * series.width_s == 200  # every ack in one bin

    svg = timeline_svg(run)
    assert svg is not None
    root = ET.fromstring(svg)  # well-formed XML
    ns = {"svg": "http://www.w3.org/2000/svg"}
    assert root.get("class") == "timeline"
    assert not [e for e in root.iter() if e.get("id")]  # many per page: no ids
    [window_rect] = root.findall("svg:rect[@class='fault-window']", ns)
    [instant] = root.findall("svg:line[@class='fault-instant']", ns)
    span_s = float(series.edges[-1])
    assert float(window_rect.get("x", "")) == pytest.approx(0.5 / span_s * TIMELINE_WIDTH, abs=0.1)
    assert float(window_rect.get("width", "")) == pytest.approx(
        0.7 / span_s * TIMELINE_WIDTH, abs=0.2
    )
    assert float(instant.get("x1", "")) == pytest.approx(1.5 / span_s * TIMELINE_WIDTH, abs=0.1)
    assert window_rect.findtext("svg:title", namespaces=ns) == "proxy:drop-response kafka-1"
    assert instant.findtext("svg:title", namespaces=ns) == "kill kafka-2"
    for line in ("throughput", "latency"):
        [path] = root.findall(f"svg:path[@class='{line}']", ns)
        assert path.get("d", "").startswith("M")
    assert "p99 latency (max 25 ms)" in (root.findtext("svg:title", namespaces=ns) or "")

    empty = make_run(tmp_path, "lost-acks", "refbroker", history=False)
    assert acked_series(empty) is None
    assert timeline_svg(empty) is None
    assert timeline_svg(tmp_path / "no-such-run") is None


# The page over three nights


@dataclass
class CellRow:
    squares: list[dict[str, str | None]] = field(default_factory=list)
    badges: list[str] = field(default_factory=list)
    svg_classes: list[str] = field(default_factory=list)
    text: str = ""


class CellsTable(HTMLParser):
    """The rows of table#cells by (cell, target): their squares (class, href, title), badges,
    the classes of the timeline's SVG elements, and their text; and every id on the page, and
    whether every element closes in order (void elements aside)."""

    VOID = frozenset({"meta", "br", "img", "input", "link", "hr", "wbr", "col"})

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[tuple[str, str], CellRow] = {}
        self.row: CellRow | None = None
        self.ids: list[str] = []
        self.open: list[str] = []
        self.misnested: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.append(str(found["id"]))
        if tag not in self.VOID:
            self.open.append(tag)
        css = found.get("class") or ""
        if tag == "tr" and found.get("data-cell"):
            self.row = CellRow()
            self.rows[(str(found["data-cell"]), str(found["data-target"]))] = self.row
        elif self.row is None:
            return
        elif "night" in css.split():
            self.row.squares.append(
                {"class": css, "href": found.get("href"), "title": found.get("title")}
            )
        elif "badge" in css.split():
            self.row.badges.append(css)
        elif css and tag in ("svg", "rect", "line", "path"):
            self.row.svg_classes.append(css)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open[-1] != tag:
            self.misnested.append(f"</{tag}> with {self.open[-3:]} open")
        else:
            self.open.pop()
        if tag == "tr":
            self.row = None

    def handle_data(self, data: str) -> None:
        if self.row is not None:
            self.row.text += data


def _three_nights(runs: Path, reports: Path) -> list[Path]:
    """baseline on kafka conforms, then does not, then conforms; on refbroker it conforms every
    night; lost-acks on kafka4, run only on the third night, acked nothing (no timeline)."""
    pages = []
    for n, (name, observed) in enumerate(zip(NIGHTS, ({}, {"lost": 2}, {}), strict=True)):
        folder = runs / f"n{n}"
        cells = [
            make_run(folder, "baseline", "kafka", observed=observed),
            make_run(folder, "baseline", "refbroker"),
        ]
        if n == 2:
            cells.append(make_run(folder, "lost-acks", "kafka4", history=False))
        pages.append(write_nightly_report(cells, name=name, reports=reports))
    return pages


def test_the_nightly_page_shows_each_cells_strip_flag_and_timeline(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    pages = _three_nights(tmp_path / "runs", reports)
    page = pages[-1]
    table = CellsTable()
    table.feed(page.read_text())
    table.close()
    assert table.misnested == []
    assert len(table.ids) == len(set(table.ids)), "duplicate ids"
    assert set(table.rows) == {FLIPPING, STABLE, ("lost-acks", "kafka4")}

    flipping = table.rows[FLIPPING]
    assert [s["class"] for s in flipping.squares] == [
        "night conforms",
        "night does_not_conform",
        "night conforms tonight",
    ]
    assert [s["title"] for s in flipping.squares] == [
        f"{NIGHTS[0]}: conforms",
        f"{NIGHTS[1]}: does not conform",
        f"{NIGHTS[2]}: conforms",
    ]
    assert [s["href"] for s in flipping.squares] == [
        f"../{NIGHTS[0]}/index.html#cell-baseline--kafka",
        f"../{NIGHTS[1]}/index.html#cell-baseline--kafka",
        "index.html#cell-baseline--kafka",
    ]
    for square in flipping.squares:  # every link lands on that night's page, on the cell
        target, anchor = str(square["href"]).split("#")
        assert f'id="{anchor}"' in (page.parent / target).read_text()
    assert flipping.badges == ["badge flaky"]
    assert "flaky" in flipping.text

    stable = table.rows[STABLE]
    assert [s["class"] for s in stable.squares] == [
        "night conforms",
        "night conforms",
        "night conforms tonight",
    ]
    assert stable.badges == []

    new = table.rows[("lost-acks", "kafka4")]
    assert [s["class"] for s in new.squares] == [
        "night missing",
        "night missing",
        "night conforms tonight",
    ]
    assert new.squares[0]["title"] == f"{NIGHTS[0]}: not run"
    assert new.badges == []

    for row in (flipping, stable):  # both ran with a lost-acks window and a kill
        assert {"timeline", "fault-window", "fault-instant", "throughput", "latency"} <= set(
            row.svg_classes
        )
        assert "no timeline" not in row.text
    assert new.svg_classes == []
    assert "no timeline" in new.text
    assert "last 3 nights" in page.read_text()


def test_summary_json_lists_exactly_the_flaky_cells_and_the_trend_shows_them(
    tmp_path: Path,
) -> None:
    reports = tmp_path / "reports"
    pages = _three_nights(tmp_path / "runs", reports)
    first, second, third = (read_summary(page) for page in pages)
    assert first["flaky"] == []
    assert second["flaky"] == []  # green then red: a regression so far, not yet flaky
    assert third["flaky"] == [
        {"cell": "baseline", "target": "kafka", "conforming": 2, "failing": 1, "nights": 3}
    ]
    assert third["history_nights"] == list(NIGHTS)
    assert [n.name for n in read_nights(reports)] == list(NIGHTS)

    trend = (reports / "index.html").read_text()
    flaky_column = {
        name: trend.split(f'data-night="{name}"')[1].split('class="flaky">')[1].split("</td>")[0]
        for name in NIGHTS
    }
    assert flaky_column == {
        NIGHTS[0]: "0",
        NIGHTS[1]: "0",
        NIGHTS[2]: "1: baseline/kafka",
    }

    # the third night again with a one-night window: nothing flips within it
    runs = sorted(p.parent for p in (tmp_path / "runs" / "n2").glob("*/run.json"))
    again = write_nightly_report(runs, name=NIGHTS[2], reports=reports, history_nights=1)
    assert read_summary(again)["flaky"] == []
    assert read_summary(again)["history_nights"] == [NIGHTS[2]]
    assert "badge flaky" not in again.read_text()


def test_the_nightly_command_names_the_flaky_cells(tmp_path: Path) -> None:
    reports, runs = tmp_path / "reports", tmp_path / "runs"
    for n, (name, observed) in enumerate(zip(NIGHTS[:2], ({}, {"lost": 2}), strict=True)):
        write_nightly_report([make_run(runs / f"n{n}", "baseline", "kafka", observed=observed)],
                             name=name, reports=reports)  # fmt: skip
    tonight = [
        make_run(runs / "n2", "baseline", "kafka"),
        make_run(runs / "n2", "baseline", "refbroker"),
    ]
    done = CliRunner().invoke(
        report_app,
        ["nightly", *map(str, tonight), "--name", NIGHTS[2], "--reports-dir", str(reports)],
    )
    assert done.exit_code == 0, done.output
    flaky_lines = [line for line in done.output.splitlines() if line.startswith("flaky:")]
    assert flaky_lines == ["flaky: baseline on kafka (conformed 2, failed 1 of the last 3 nights)"]


def test_the_nightly_page_lists_the_versions_tested(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    page = write_nightly_report(
        [
            make_run(runs, "baseline", "kafka"),
            make_run(runs, "baseline", "kafka4"),
            make_run(runs, "baseline", "refbroker"),
            make_run(runs, "lost-acks", "kafka4", client="java:3.9.2"),
            make_run(runs, "lost-acks", "kafka", client="franz-go:v1.22.2"),
        ],
        name=NIGHTS[0],
        reports=tmp_path / "reports",
    )
    assert read_summary(page)["versions"] == {
        "kafka": ["Kafka 3.9.2 (ZooKeeper)"],
        "kafka4": ["Kafka 4.4.0 (KRaft)"],
        "refbroker": ["reference broker, kafka-3.9 rules"],
        "clients": ["franz-go:v1.22.2", "java:3.9.2", "librdkafka:2.16.1"],
    }
    cells = page.read_text().split('<table id="cells">')[1].split("</table>")[0]
    assert '<td class="label">lost-acks_java-3.9.2</td><td>kafka4</td>' in cells
    assert '<td class="client">java:3.9.2</td>' in cells
    table = page.read_text().split('<table id="versions">')[1].split("</table>")[0]
    assert "<td>kafka4</td><td>Kafka 4.4.0 (KRaft)</td>" in table
    assert broker_version("refbroker", "kafka-2.0") == "reference broker, kafka-2.0 rules"
