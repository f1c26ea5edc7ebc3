"""`eoslab scenarios list|show|run` and the top-level `eoslab run`."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from confluent_kafka import KafkaException
from rich.table import Table

from eoslab.console import (
    JsonOption,
    RuntimeOption,
    console,
    count_option,
    errors,
    fail,
    identifier_column,
)
from eoslab.nemesis.timeline import resolve
from eoslab.rundir import GroupProtocol, HandlerMode, VerdictStatus, lab_target
from eoslab.runtime import LabError, get_runtime
from eoslab.scenarios.catalogue import ScenarioError, catalogue, find_scenario, load_scenario
from eoslab.scenarios.executor import RunError, execute
from eoslab.scenarios.schema import Scenario

app = typer.Typer(help="The scenario catalogue: list, show, run.", no_args_is_help=True)

ScenarioArgument = Annotated[str, typer.Argument(help="A catalogue name or a scenario file.")]


@app.command("list")
def list_scenarios(as_json: JsonOption = False) -> None:
    """Every catalogue scenario: targets, modes, faults and what it expects (its description:
    `eoslab scenarios show NAME`)."""
    scenarios = [load_scenario(path) for path in catalogue().values()]
    if as_json:
        typer.echo(json.dumps([_json_row(scenario) for scenario in scenarios], indent=2))
        return
    console.print(
        f"scenario catalogue: {len(scenarios)} scenarios "
        "(`eoslab scenarios show NAME`: what one does and proves; --json: everything)"
    )
    table = Table.grid(padding=(0, 2))
    identifier_column(table, "scenario", [scenario.name for scenario in scenarios])
    table.add_column(overflow="fold")
    for scenario in scenarios:
        table.add_row(f"[bold]{scenario.name}[/]", _summary(scenario))
    console.print(table)


def _json_row(scenario: Scenario) -> dict[str, Any]:
    expected = scenario.expected.for_run(scenario.targets[0], scenario.run_modes[0])
    return {
        "scenario": scenario.name,
        "targets": list(scenario.targets),
        "nemesis": [step.kind for step in scenario.nemesis],
        "modes": [m for m in scenario.run_modes if m is not None],
        "expected": {k: v for k, v in expected.items() if v not in ("0", ">=0", "any")},
        "description": " ".join(scenario.description.split()),
    }


def _summary(scenario: Scenario) -> str:
    """Two lines: where it runs and what it breaks; what it expects to see (``>0``) per cell,
    cells that expect the same grouped."""
    modes = [m for m in scenario.run_modes if m is not None]
    faults = Counter(step.kind for step in scenario.nemesis)
    where = [
        ", ".join(scenario.targets),
        *([f"modes: {', '.join(modes)}"] if modes else []),
        "faults: " + (", ".join(k if n == 1 else f"{k} x{n}" for k, n in faults.items()) or "none"),
    ]
    seen = {
        (target, mode): _seen(scenario.expected.for_run(target, mode))
        for target in scenario.targets
        for mode in scenario.run_modes
    }
    # a cell is named by what its expectation depends on: its target, its mode, or both
    by_target = any(len({seen[t, m] for t in scenario.targets}) > 1 for m in scenario.run_modes)
    by_mode = any(len({seen[t, m] for m in scenario.run_modes}) > 1 for t in scenario.targets)
    cells: dict[tuple[str, ...], list[str]] = {}
    for (target, mode), names in seen.items():
        label = "/".join([*([target] if by_target else []), *([mode or ""] if by_mode else [])])
        labels = cells.setdefault(names, [])
        if label not in labels:
            labels.append(label)
    expects = "; ".join(
        (", ".join(names) or "none") + (f" ({', '.join(labels)})" if len(cells) > 1 else "")
        for names, labels in cells.items()
    )
    return f"{' · '.join(where)}\n[dim]expects >0:[/] {expects}"


def _seen(expected: dict[str, str | dict[str, str]]) -> tuple[str, ...]:
    """The checks a cell expects to see (``>0``), broker errors among them."""
    flat = [
        (name, form)
        for key, value in expected.items()
        for name, form in (value.items() if isinstance(value, dict) else [(key, value)])
    ]
    return tuple(name for name, form in flat if form == ">0")


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
        yaml.safe_dump(
            loaded.model_dump(mode="json", exclude_defaults=True, by_alias=True), sort_keys=False
        )
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
    expect_as: Annotated[
        str | None,
        typer.Option(
            help="With --target external: judge the cluster as kafka (Kafka 3.9, the default) "
            "or kafka4 (Kafka 4: its timeline and expectations)."
        ),
    ] = None,
    replication: Annotated[
        int | None, count_option("Replication factor of the run's topic (external: 3).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Override the scenario's seed.")] = None,
    records: Annotated[int | None, count_option("Override the record count.")] = None,
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
    client: Annotated[
        str | None,
        typer.Option(
            help="The client every role runs: java:3.9.2 (Kafka's Java client, any release on "
            "Maven Central), franz-go:v1.22.2 (any franz-go module version), librdkafka:2.2.0 "
            "(an older librdkafka make setup installs); built on first use. Default: the "
            "workload's own librdkafka."
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
    """Run a scenario against the running lab; prints the run directory. Every fault of the
    timeline is judged (took effect or not); exits 3 when one did not (the run is invalid)."""
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
            expect_as=expect_as,
            replication=replication,
            mode=mode,
            sink=sink,
            client=client,
            group_protocol=group_protocol,
        )
    except (ScenarioError, RunError, LabError) as error:
        raise fail(error) from error
    except KafkaException as error:  # the cluster's answer to the run's own admin calls
        raise fail(f"the run stopped on the cluster's answer: {error.args[0].str()}") from error
    for fault in result.info.faults:
        mark = "took effect" if fault.took_effect else "[red]NO EFFECT[/]"
        errors.print(f"fault {fault.summary}: {mark}", highlight=False)
    for problem in result.problems:
        errors.print(f"[yellow]warning:[/] {problem}", highlight=False)
    typer.echo(os.fspath(result.run_dir.path))
    if result.invalid_because:
        errors.print("[red]the run is invalid[/]: it does not test what its scenario says")
        raise typer.Exit(code=VerdictStatus.INVALID.exit_code)


app.command("run")(run)
