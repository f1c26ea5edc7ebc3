"""`eoslab orchestrate`: run the conformance matrix through Airflow now, and reach the lab's
Airflow from a shell.

`matrix` is what `make lab` and `make conformance` run: `airflow dags test eos_nightly` in the
lab's AIRFLOW_HOME, against the running lab, without a scheduler (so no other DAG run shares
the lab meanwhile), then the path of the matrix report.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from datetime import UTC, datetime
from typing import Annotated

import typer

from eoslab.orchestration.matrix import MATRICES
from eoslab.report.render import read_summary
from eoslab.runtime.airflow import AirflowHome, AirflowSetupError, venv_bin
from eoslab.runtime.local import LocalRuntime
from eoslab.settings import reports_root

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
    scenarios: Annotated[list[str] | None, typer.Option("--scenario", help="Only these.")] = None,
    records: Annotated[int | None, typer.Option(help="Records per cell.")] = None,
) -> None:
    """Run the matrix through Airflow against the running lab; prints the matrix report.
    Exits 0 when every cell conforms, 2 when one does not, 1 when the matrix could not run."""
    conf: dict[str, object] = {"matrix": which, "scenarios": scenarios or []}
    if records is not None:
        conf["records"] = records
    logical = datetime.now(UTC).replace(microsecond=0)
    done = subprocess.run(
        [
            str(venv_bin() / "airflow"),
            "dags",
            "test",
            "eos_nightly",
            logical.isoformat(),
            "-c",
            json.dumps(conf),
        ],
        env={**os.environ, **_home().environment()},
        check=False,
    )
    index = reports_root() / "nightly" / logical.strftime("%Y%m%dT%H%M%S") / "index.html"
    if not index.is_file():
        typer.echo(f"error: the matrix left no report (airflow exited {done.returncode})", err=True)
        raise typer.Exit(code=1)
    summary = read_summary(index)
    typer.echo(f"\n{summary['conforming']} of {summary['cells']} cells conform. Report: {index}")
    if not summary["conforms"]:
        raise typer.Exit(code=2)


@app.command("env")
def environment() -> None:
    """`export` lines for the lab's Airflow (eval them to use the airflow CLI on the lab)."""
    for name, value in _home().environment().items():
        typer.echo(f"export {name}={shlex.quote(value)}")


if __name__ == "__main__":
    app()
