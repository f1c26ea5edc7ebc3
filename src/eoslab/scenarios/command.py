"""`eoslab scenarios list|show|run` and the top-level `eoslab run`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.table import Table

from eoslab.console import JsonOption, RuntimeOption, console, errors, fail, identifier_column
from eoslab.nemesis.timeline import resolve
from eoslab.rundir import GroupProtocol, HandlerMode, lab_target
from eoslab.runtime import LabError, get_runtime
from eoslab.scenarios.catalogue import ScenarioError, catalogue, find_scenario, load_scenario
from eoslab.scenarios.executor import RunError, execute

app = typer.Typer(help="The scenario catalogue: list, show, run.", no_args_is_help=True)

ScenarioArgument = Annotated[str, typer.Argument(help="A catalogue name or a scenario file.")]


@app.command("list")
def list_scenarios(as_json: JsonOption = False) -> None:
    """Every catalogue scenario: targets, faults, expected anomalies."""
    rows: list[dict[str, Any]] = []
    for name, path in catalogue().items():
        scenario = load_scenario(path)
        expected = scenario.expected.for_run(scenario.targets[0], scenario.run_modes[0])
        rows.append(
            {
                "scenario": name,
                "targets": list(scenario.targets),
                "nemesis": [step.kind for step in scenario.nemesis],
                "modes": [m for m in scenario.run_modes if m is not None],
                "expected": {k: v for k, v in expected.items() if v not in ("0", ">=0", "any")},
                "description": " ".join(scenario.description.split()),
            }
        )
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="scenario catalogue")
    identifier_column(table, "scenario", [row["scenario"] for row in rows])
    for column in ("targets", "modes", "nemesis", "expected (not 0)", "description"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["scenario"],
            ", ".join(row["targets"]),
            ", ".join(row["modes"]) or "-",
            ", ".join(row["nemesis"]) or "-",
            ", ".join(f"{k} {v}" for k, v in row["expected"].items()) or "none",
            row["description"],
        )
    console.print(table)


@app.command()
def show(
    scenario: ScenarioArgument,
    target: Annotated[str | None, typer.Option(help="Also resolve the timeline for it.")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed for the resolved timeline.")] = None,
) -> None:
    """The scenario as validated (YAML), and its resolved timeline for a target."""
    try:
        loaded = find_scenario(scenario)
    except ScenarioError as error:
        raise fail(error) from error
    typer.echo(
        yaml.safe_dump(loaded.model_dump(mode="json", exclude_defaults=True), sort_keys=False)
    )
    if target is not None:
        try:
            chosen = lab_target(target)
        except ValueError as error:
            raise fail(error) from error
        steps = resolve(loaded.nemesis, chosen, loaded.seed if seed is None else seed)
        for step in steps:
            trigger = (
                f"at {step.at_s} s" if step.at_s is not None else f"after {step.after_acked} acked"
            )
            length = f" for {step.duration_s} s" if step.duration_s is not None else ""
            typer.echo(f"step {step.index}: {step.kind} {step.target or ''} {trigger}{length}")


def run(
    scenario: ScenarioArgument,
    *,
    target: Annotated[
        str,
        typer.Option(help="kafka, kafka4 or refbroker (the lab's), or external (--bootstrap)."),
    ] = "kafka",
    bootstrap: Annotated[
        str | None, typer.Option(help="With --target external: the cluster's bootstrap servers.")
    ] = None,
    replication: Annotated[
        int | None, typer.Option(help="Replication factor of the run's topic (external: 3).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Override the scenario's seed.")] = None,
    records: Annotated[int | None, typer.Option(help="Override the record count.")] = None,
    runs_dir: Annotated[
        Path | None, typer.Option(help="Where run directories go (default: runs/).")
    ] = None,
    mode: Annotated[
        HandlerMode | None,
        typer.Option(
            help="Consumers in this handler mode: the scenario's consumer workload in that mode, "
            "or, for a producer scenario, the default one (an end-to-end cell)."
        ),
    ] = None,
    sink: Annotated[
        str | None,
        typer.Option(
            help="The consumers' database: lab (the lab's PostgreSQL) or a postgresql:// URL "
            "(default: SQLite in the run directory)."
        ),
    ] = None,
    group_protocol: Annotated[
        GroupProtocol | None,
        typer.Option(
            help="The consumers' group protocol: classic, or consumer (KIP-848; kafka4 only). "
            "Default: the scenario's, classic."
        ),
    ] = None,
    runtime: RuntimeOption = "local",
) -> None:
    """Run a scenario against the running lab; prints the run directory."""
    try:
        loaded = find_scenario(scenario)
        lab = get_runtime(runtime)
        result = execute(
            loaded,
            target,
            runtime=lab,
            config=lab.config,
            runs_root=runs_dir,
            seed=seed,
            records=records,
            bootstrap=bootstrap,
            replication=replication,
            mode=mode,
            sink=sink,
            group_protocol=group_protocol,
        )
    except (ScenarioError, RunError, LabError) as error:
        raise fail(error) from error
    for problem in result.problems:
        errors.print(f"[yellow]warning:[/] {problem}", highlight=False)
    typer.echo(os.fspath(result.run_dir.path))


app.command("run")(run)
