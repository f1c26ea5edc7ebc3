"""`eoslab report run|nightly|trend`: write the HTML, JSON and JUnit reports of checked runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from eoslab.console import fail
from eoslab.report.render import (
    exit_code,
    read_summary,
    write_nightly_report,
    write_run_report,
    write_trend,
)
from eoslab.rundir import RunDir, RunDirError
from eoslab.settings import REPORTS_DIR

app = typer.Typer(
    help="Reports of checked runs: HTML, summary.json, junit.xml.", no_args_is_help=True
)

ReportsOption = Annotated[
    Path | None,
    typer.Option("--reports-dir", envvar=REPORTS_DIR, help="Where reports go (default: reports/)."),
]


def _existing(paths: list[Path]) -> list[Path]:
    """The run directories, each with a readable run.json; else one error line naming them."""
    missing = [str(p) for p in paths if not (p / "run.json").is_file()]
    if missing:
        raise fail(f"not a run directory (no run.json): {', '.join(missing)}")
    for path in paths:
        try:
            RunDir(path).read_info()
        except (OSError, RunDirError) as error:
            raise fail(error) from error
    return paths


@app.command()
def run(
    run_dir: Annotated[Path, typer.Argument(help="A run directory (runs/<run_id>).")],
    reports_dir: ReportsOption = None,
) -> None:
    """One run's report; prints the path of its index.html."""
    typer.echo(write_run_report(_existing([run_dir])[0], reports_dir))


@app.command()
def nightly(
    run_dirs: Annotated[list[Path], typer.Argument(help="The run directories of the matrix.")],
    name: Annotated[
        str | None, typer.Option(help="The matrix's folder name (default: the UTC time).")
    ] = None,
    reports_dir: ReportsOption = None,
) -> None:
    """A matrix report over runs (plus each run's report and the trend); prints its index.html.
    Exits 3 when a cell is invalid (a fault that did not take effect), else 2 when a cell does
    not conform or has no verdict."""
    index = write_nightly_report(_existing(run_dirs), name, reports_dir)
    typer.echo(index)
    summary = read_summary(index)
    for flaky in summary.get("flaky", []):
        typer.echo(
            f"flaky: {flaky['cell']} on {flaky['target']} (conformed {flaky['conforming']}, "
            f"failed {flaky['failing']} of the last {flaky['nights']} nights)"
        )
    if code := exit_code(summary):
        raise typer.Exit(code=code)


@app.command()
def trend(reports_dir: ReportsOption = None) -> None:
    """Rewrite reports/index.html, the trend over every nightly matrix."""
    typer.echo(write_trend(reports_dir))
