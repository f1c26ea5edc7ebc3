"""The matrix report as a browser shows it: headless Chromium renders it, takes a screenshot,
and dumps the DOM, whose matrix table must hold every cell with its status, and whose cells
table each cell's timeline and history strip."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from eoslab.report.render import write_nightly_report, write_run_report
from eoslab.rundir import RunDir
from synthetic_runs import make_run

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1200,1600",
]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium")
    assert binary, "chromium is needed to render the report: `make setup` installs it"
    return subprocess.run(
        [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


class MatrixCells(HTMLParser):
    """The cells of table#matrix: (scenario, target) -> (status, css classes, link)."""

    def __init__(self) -> None:
        super().__init__()
        self.in_matrix = False
        self.cell: tuple[str, str] | None = None
        self.cells: dict[tuple[str, str], tuple[str, str, str | None]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "table" and found.get("id") == "matrix":
            self.in_matrix = True
        elif self.in_matrix and tag == "td":
            self.cell = (str(found["data-scenario"]), str(found["data-target"]))
            self.cells[self.cell] = (str(found["data-status"]), str(found["class"]), None)
        elif self.cell and tag == "a":
            status, css, _ = self.cells[self.cell]
            self.cells[self.cell] = (status, css, found.get("href"))

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.in_matrix = False
        elif tag == "td":
            self.cell = None


def test_chromium_renders_the_matrix_with_every_cell(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    index = write_nightly_report(
        [
            make_run(runs, "baseline", "kafka"),
            make_run(runs, "baseline", "refbroker", observed={"lost": 2}),
            make_run(
                runs,
                "no-idempotence",
                "kafka",
                expected={"duplicate": ">0"},
                observed={"duplicate": 9},
            ),
            make_run(runs, "no-idempotence", "refbroker", checked=False),
        ],
        name="browser",
        reports=tmp_path / "reports",
    )
    shot = tmp_path / "matrix.png"
    done = chromium(tmp_path / "profile-1", f"--screenshot={shot}", index.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes()[:8] == PNG_MAGIC
    assert int.from_bytes(shot.read_bytes()[16:20], "big") == 1200  # the PNG's width

    done = chromium(tmp_path / "profile-2", "--dump-dom", index.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    parser = MatrixCells()
    parser.feed(done.stdout)
    statuses = {cell: status for cell, (status, _, _) in parser.cells.items()}
    assert statuses == {
        ("baseline", "kafka"): "conforms",
        ("baseline", "refbroker"): "does not conform",
        ("no-idempotence", "kafka"): "conforms",
        ("no-idempotence", "refbroker"): "error",
    }
    _status, css, href = parser.cells[("baseline", "refbroker")]
    assert "does_not_conform" in css
    assert href is not None
    assert (index.parent / href).resolve().is_file()
    assert "2 of 4 cells conform" in " ".join(done.stdout.split())
    cells = done.stdout[done.stdout.index('id="cells"') :]
    assert cells.count('<svg xmlns="http://www.w3.org/2000/svg" class="timeline"') == 4
    assert cells.count('class="fault-window"') == 4
    assert cells.count('class="night conforms tonight"') == 2
    assert cells.count('class="night does_not_conform tonight"') == 1


def test_chromium_renders_a_run_page_with_every_plot(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "runs", "baseline", "refbroker", observed={"duplicate": 2})
    places = RunDir(run_dir).anomaly_dir("duplicate")
    places.mkdir(parents=True)
    pq.write_table(
        pa.table({"partition": pa.array([0, 1], pa.int32()), "offset": pa.array([4, 7])}),
        places / "part-0.parquet",
    )
    page = write_run_report(run_dir, tmp_path / "reports")
    done = chromium(tmp_path / "profile", "--dump-dom", page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    for section in ('id="anomaly-map"', 'id="figure"'):
        drawn = dom[dom.index(section) :]
        assert drawn.index("<svg") < drawn.index("</div>"), f"{section} has no plot"
    assert "duplicate (2)" in dom
