"""`eoslab orchestrate`: run the conformance matrix through Airflow now, and reach the lab's
Airflow from a shell.

`matrix` is what `make lab` and `make conformance` run: a run of eos_nightly against the
running lab, on the lab's Airflow scheduler when the lab runs one (a lane per target, the
targets' cells side by side: :mod:`~eoslab.orchestration.scheduler`), else `airflow dags test
eos_nightly` in the lab's AIRFLOW_HOME (one task at a time: one lane). It shows the cells'
phases as they pass (Airflow's own output goes to a log file), then the matrix, the report's
path and where the logs are.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.live import Live
from rich.table import Table

from eoslab.console import console, count_option, fail, identifier_column, log_tail
from eoslab.orchestration.matrix import MATRICES, Cell, MatrixError, plan
from eoslab.orchestration.progress import CellProgress, Phase, watch
from eoslab.orchestration.scheduler import FINISHED, Scheduler, SchedulerError
from eoslab.probe.every_flow import ALL_FLOWS
from eoslab.report.render import exit_code, read_summary
from eoslab.rundir import LAB_TARGETS
from eoslab.runtime.airflow import AirflowHome, AirflowSetupError, venv_bin
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.topology import LabConfig
from eoslab.settings import matrix_clients, reports_root, runs_root

NIGHTLY = "eos_nightly"

app = typer.Typer(
    help="Airflow in the lab: the matrix now, the lab's Airflow environment.", no_args_is_help=True
)


def _home() -> AirflowHome:
    try:
        return LocalRuntime().airflow().prepare()
    except AirflowSetupError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=1) from error


@app.command()
def matrix(
    which: Annotated[
        str, typer.Option("--matrix", help=f"One of {', '.join(MATRICES)}.")
    ] = "default",
    *,
    scenarios: Annotated[list[str] | None, typer.Option("--scenario", help="Only these.")] = None,
    targets: Annotated[
        list[str] | None,
        typer.Option(
            "--target",
            help=f"Only on these ({', '.join(LAB_TARGETS)}; default: the lab's, EOSLAB_TARGETS).",
        ),
    ] = None,
    records: Annotated[int | None, count_option("Records per cell.")] = None,
    clients: Annotated[
        list[str] | None,
        typer.Option(
            "--client",
            help="Only the cells of these clients (java:3.9.2, franz-go:v1.22.2, a family: java, "
            "or librdkafka for the workload's own; the full matrix runs these instead of its "
            "default clients). Default: EOSLAB_CLIENTS, comma-separated, else every one.",
        ),
    ] = None,
    probe_flows: Annotated[
        list[str] | None,
        typer.Option(
            "--probe-flow",
            help="Also diff these probe flows on every target (the full matrix diffs them all).",
        ),
    ] = None,
    lanes: Annotated[
        bool,
        typer.Option(
            help="A lane per target through the lab's Airflow scheduler when the lab runs one, "
            "else `airflow dags test`: one cell after the other (--no-lanes insists on it, and "
            "refuses a lab whose scheduler would run its tasks too).",
        ),
    ] = True,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Show Airflow's output as it runs (`airflow dags test`)."
        ),
    ] = False,
) -> None:
    """Run the matrix through Airflow against the running lab; shows each cell's phase, then
    the matrix and its report. Airflow's output goes to a log file named at the end (``-v``
    shows it). Exits 0 when every cell conforms, 3 when one is invalid (a fault that did not
    take effect), else 2 when one does not conform, 1 when the matrix could not run."""
    request: dict[str, object] = {
        "matrix": which,
        "scenarios": scenarios or [],
        "targets": targets or list(LabConfig().targets),
        "clients": clients or matrix_clients(),
        # make conformance diffs every flow; make lab stays quick
        "probe_diffs": which == "full" or bool(probe_flows),
        "probe_flows": probe_flows or [],
    }
    if records is not None:
        request["records"] = records
    try:
        cells = plan(request)
    except MatrixError as error:
        raise fail(error) from error
    unknown = sorted(set(probe_flows or ()) - ALL_FLOWS.keys())
    if unknown:
        raise fail(f"unknown probe flow(s) {unknown}; choose among {', '.join(ALL_FLOWS)}")
    home = _home()
    logical = datetime.now(UTC).replace(microsecond=0)
    night = logical.strftime("%Y%m%dT%H%M%S")
    lab_logs = LabConfig().state_dir / "logs"
    log = lab_logs / f"matrix-{night}.log"
    runs_dir = runs_root() / f"nightly-{night}"
    try:
        scheduler = Scheduler.of_lab(home)
    except SchedulerError as error:
        raise fail(error) from error
    if scheduler is not None and not lanes:
        raise fail(
            "--no-lanes: the lab runs Airflow's scheduler, which would run the tasks of `airflow "
            "dags test` as well; bring the lab up without it for one lane (make lab LANES=0, or "
            "EOSLAB_WITH_AIRFLOW=0 eoslab lab up)"
        )
    how = "a lane per target" if scheduler else "one lane"
    console.print(f"matrix: {len(cells)} cells through Airflow, {how} (eos_nightly {night})")
    if scheduler is not None:
        returncode = _run_scheduled(scheduler, request, logical, log, watched=(cells, runs_dir))
    else:
        returncode = _run_tested(home, request, logical, log, verbose, watched=(cells, runs_dir))
    index = reports_root() / "nightly" / night / "index.html"
    progress = watch(cells, runs_dir)
    if verbose:  # Airflow's output went by: the matrix once more
        console.print(_matrix_table(progress))
    for cell in progress:
        for mismatch in cell.mismatches:
            console.print(f"  {cell.name}: {mismatch}", highlight=False, soft_wrap=True)
        if not cell.phase.done:  # its task failed before a verdict: say so, never stay silent
            console.print(
                f"  {cell.name}: no verdict ({cell.phase} when Airflow ended; its task failed: "
                "Airflow's log says why)",
                highlight=False,
                soft_wrap=True,
            )
    logs = f"Airflow's log: {log}; the lab's logs: {lab_logs}/"
    if not index.is_file():
        raise fail(
            f"the matrix left no report (airflow exited {returncode}). "
            + ("" if verbose else f"Last lines of {log}:\n{log_tail(log, 30)}\n")
            + logs
        )
    summary = read_summary(index)
    invalid = f", {summary['invalid']} invalid" if summary.get("invalid") else ""
    # a cell whose run failed before it had a folder is not in the report: counted all the same
    unrun = len(cells) - summary["cells"]
    without = f", {unrun} without a run" if unrun > 0 else ""
    console.print(
        f"{summary['conforming']} of {len(cells)} cells conform{invalid}{without}. Report: {index}",
        soft_wrap=True,  # a path stays on one line, whatever the width
    )
    if not verbose:
        console.print(logs, highlight=False, soft_wrap=True)
    if code := exit_code(summary) or (1 if unrun > 0 else 0):
        raise typer.Exit(code=code)


POLL_S = 1.0


Watched = tuple[list[Cell], Path]
"""The cells and the folder of their run directories, whose phases are shown."""


def _run_tested(
    home: AirflowHome,
    request: dict[str, object],
    logical: datetime,
    log: Path,
    verbose: bool,
    *,
    watched: Watched,
) -> int:
    """`airflow dags test eos_nightly`: one task at a time, Airflow's output in ``log`` (or
    on the terminal, ``verbose``); its exit code."""
    argv = [
        str(venv_bin() / "airflow"),
        *("dags", "test", NIGHTLY, logical.isoformat(), "-c", json.dumps(request)),
    ]
    env = {**os.environ, **home.environment()}
    if verbose:
        return subprocess.run(argv, env=env, check=False).returncode
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        child = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        _watch(lambda: child.poll() is not None, *watched)
    return child.returncode


def _run_scheduled(
    scheduler: Scheduler,
    request: dict[str, object],
    logical: datetime,
    log: Path,
    *,
    watched: Watched,
) -> int:
    """A DAG run of eos_nightly on the lab's scheduler, watched until it ends (interrupted: the
    run is marked failed, so its tasks stop); what happened goes to ``log``. 0 when the DAG run
    succeeded."""
    run_id = f"matrix__{logical.strftime('%Y%m%dT%H%M%S')}"
    log.parent.mkdir(parents=True, exist_ok=True)
    tasks_log = scheduler.home.home / "logs" / f"dag_id={NIGHTLY}" / f"run_id={run_id}"
    with log.open("w") as out:
        try:
            scheduler.trigger(NIGHTLY, run_id, logical.isoformat(), request)
        except SchedulerError as error:
            out.write(f"{error}\n")
            return 1
        out.write(
            f"{NIGHTLY} {run_id} triggered at {scheduler.home.url}; tasks' logs: {tasks_log}/\n"
        )
        state = "queued"

        def ended() -> bool:
            nonlocal state
            with contextlib.suppress(SchedulerError, OSError):  # asked again at the next poll
                state = scheduler.state(NIGHTLY, run_id)
            return state in FINISHED

        try:
            _watch(ended, *watched)
        except KeyboardInterrupt:
            scheduler.fail(NIGHTLY, run_id)
            raise
        out.write(f"{NIGHTLY} {run_id}: {state}\n")
        if state != "success":
            failed = [
                f"{ti['task_id']}[{ti['map_index']}]"
                for ti in scheduler.task_instances(NIGHTLY, run_id)
                if ti["state"] == "failed"
            ]
            out.write(f"failed tasks: {', '.join(failed) or 'none'}; their logs: {tasks_log}/\n")
    return 0 if state == "success" else 1


def _watch(ended: Callable[[], bool], cells: list[Cell], runs_dir: Path) -> None:
    """Show the cells' phases until ``ended``: a live table on a terminal, one line per
    finished cell elsewhere."""
    if console.is_terminal:
        with Live(_matrix_table(watch(cells, runs_dir)), console=console) as live:
            while not ended():
                time.sleep(POLL_S)
                live.update(_matrix_table(watch(cells, runs_dir)))
        return
    finished: set[str] = set()
    while not ended():
        time.sleep(POLL_S)
        for cell in watch(cells, runs_dir):
            if cell.phase.done and cell.name not in finished:
                finished.add(cell.name)
                console.print(
                    f"  {cell.name}: {cell.phase} ({cell.records} records, {cell.elapsed_s:.0f} s)",
                    highlight=False,
                    soft_wrap=True,
                )


def _matrix_table(progress: list[CellProgress]) -> Table:
    """A line a cell, which fits 80 columns while the cells conform (the longest cell name of
    the default matrix is 54 characters); the mismatches of a cell that does not are printed
    under it once the matrix has run."""
    table = Table(
        title="conformance matrix",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    identifier_column(table, "cell", [p.name for p in progress])
    for column in ("phase", "records", "time"):
        table.add_column(column, justify="right" if column != "phase" else "left", no_wrap=True)
    colours = {
        Phase.CONFORMS: "green",
        Phase.DOES_NOT_CONFORM: "bold red",
        Phase.INVALID: "bold red",
    }
    for cell in progress:
        colour = colours.get(cell.phase, "yellow")
        table.add_row(
            cell.name,
            f"[{colour}]{cell.phase}[/]",
            str(cell.records) if cell.phase is not Phase.WAITING else "",
            f"{cell.elapsed_s:.0f} s" if cell.phase is not Phase.WAITING else "",
        )
    return table


@app.command("env")
def environment() -> None:
    """`export` lines for the lab's Airflow (eval them to use the airflow CLI on the lab)."""
    for name, value in _home().environment().items():
        typer.echo(f"export {name}={shlex.quote(value)}")


if __name__ == "__main__":
    app()
