"""`eoslab probe list|run|diff`: the seed flows, crafted at the protocol level, on the lab."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from eoslab.console import JsonOption, RuntimeOption, console, fail, identifier_column
from eoslab.probe.diff import FlowDiff
from eoslab.probe.every_flow import ALL_FLOWS, PROBE_FAILURES, diff_flow_on_lab
from eoslab.probe.flows import Flow
from eoslab.probe.group_flows import GroupFlow
from eoslab.probe.group_runner import GroupFlowRun
from eoslab.probe.runner import FlowRun
from eoslab.probe.targets import run_group_flow_on_lab, run_on_lab
from eoslab.probe.txn_flows import TxnFlow
from eoslab.probe.txn_runner import TxnFlowRun, run_txn_flow_on_lab
from eoslab.rundir import LAB_TARGETS
from eoslab.runtime import LabError, get_runtime
from eoslab.runtime.topology import LabConfig

app = typer.Typer(help="Crafted Produce flows from the seeds, on Kafka and the reference broker.")

EXIT_DIFFERENT = 1
EXIT_FAILED = 2

FlowArgument = Annotated[str, typer.Argument(help=f"One of: {', '.join(ALL_FLOWS)}.")]


def _flow(name: str) -> Flow | GroupFlow | TxnFlow:
    if name not in ALL_FLOWS:
        raise fail(f"unknown flow {name!r}; choose one of: {', '.join(ALL_FLOWS)}", EXIT_FAILED)
    return ALL_FLOWS[name]


def _lab_config(runtime: str) -> LabConfig:
    try:
        return get_runtime(runtime).config
    except LabError as error:
        raise fail(error, EXIT_FAILED) from error


@app.command("list")
def list_flows(as_json: JsonOption = False) -> None:
    """The flows: name, seed, what happens."""
    if as_json:
        rows = [
            {"flow": f.name, "seed": f.seed, "description": f.description}
            for f in ALL_FLOWS.values()
        ]
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="probe flows")
    identifier_column(table, "flow", list(ALL_FLOWS))
    for column in ("seed", "description"):
        table.add_column(column)
    for flow in ALL_FLOWS.values():
        table.add_row(flow.name, flow.seed, flow.description)
    console.print(table)


@app.command()
def run(
    flow: FlowArgument,
    target: Annotated[str, typer.Option(help=f"One of: {', '.join(LAB_TARGETS)}.")] = "kafka",
    as_json: JsonOption = False,
    runtime: RuntimeOption = "local",
) -> None:
    """Play a flow on a fresh topic of one target and print its transcript."""
    chosen = _flow(flow)
    if target not in LAB_TARGETS:
        raise fail(
            f"unknown target {target!r}; choose one of: {', '.join(LAB_TARGETS)}", EXIT_FAILED
        )
    try:
        played: FlowRun | GroupFlowRun | TxnFlowRun
        if isinstance(chosen, GroupFlow):
            played = run_group_flow_on_lab(chosen, target, _lab_config(runtime))
        elif isinstance(chosen, TxnFlow):
            played = run_txn_flow_on_lab(chosen, target, _lab_config(runtime))
        else:
            played = run_on_lab(chosen, target, _lab_config(runtime))
    except PROBE_FAILURES as error:
        raise fail(f"{flow} on {target}: {error}", EXIT_FAILED) from error
    if as_json:
        typer.echo(json.dumps(played.as_json(), indent=2))
        return
    console.print(transcript_table(played))


@app.command()
def diff(flow: FlowArgument, as_json: JsonOption = False, runtime: RuntimeOption = "local") -> None:
    """Play a flow on Kafka 3.9, the reference broker and (when the lab runs it) Kafka 4, and
    print every difference in error codes and offsets; exits 1 when a difference of the
    reference broker's is not a known divergence (Kafka 4's are version differences)."""
    chosen = _flow(flow)
    try:
        config = _lab_config(runtime)
        result = diff_flow_on_lab(chosen, config)
    except PROBE_FAILURES as error:
        raise fail(f"{flow}: {error}", EXIT_FAILED) from error
    if as_json:
        typer.echo(json.dumps(result.as_json(), indent=2))
    else:
        print_diff(result)
    if not result.conforms:
        raise typer.Exit(code=EXIT_DIFFERENT)


def transcript_table(played: FlowRun | GroupFlowRun | TxnFlowRun) -> Table:
    if isinstance(played, GroupFlowRun):
        where = f"group {played.group}, coordinator {played.coordinator}"
    elif isinstance(played, TxnFlowRun):
        where = f"leader {played.leader}, group {played.group}"
    else:
        where = f"leader {played.leader}, producer id {played.producer_id}"
    table = Table(title=f"{played.flow.name} on {played.target} ({played.topic}, {where})")
    columns = (
        "step",
        "api",
        "batch / member",
        "epoch",
        "base seq",
        "records",
        "answer",
        "base offset",
        "ms",
    )
    for column in columns:
        table.add_column(column)
    for e in played.exchanges:
        answer = e.error or "(no answer)"
        if e.ack_lost:
            answer += " (ack lost)"
        if e.detail:
            answer += " " + json.dumps(e.detail, separators=(",", ":"))
        elapsed = "" if e.answered_ms is None else str(e.answered_ms - e.sent_ms)
        table.add_row(
            *(
                "" if value is None else str(value)
                for value in (e.step, e.api, e.tag, e.epoch, e.base_sequence, e.record_count)
            ),
            answer,
            "" if e.base_offset is None else str(e.base_offset),
            elapsed,
        )
    return table


def print_diff(result: FlowDiff) -> None:
    """The reference broker's differences from Kafka 3.9, then Kafka 4's (version differences),
    each with its explanation; a three-way diff shows every target's answer."""
    three_way = result.kafka4 is not None
    targets = "Kafka 3.9, Kafka 4 and the reference broker" if three_way else "both targets"
    if result.identical:
        console.print(f"{result.flow}: identical on {targets}")
        return
    rows = [*result.differences, *result.versions]
    table = Table(title=f"{result.flow}: differences (offsets relative to the flow's first)")
    values = ("kafka", "kafka4", "refbroker") if three_way else ("kafka", "refbroker")
    for column in ("#", "step", "api", "batch", "what", *values, "known"):
        table.add_column(column)
    explanations = list(dict.fromkeys(d.known for d in rows if d.known))
    for d in rows:
        known = "[bold red]no[/]" if d.known is None else f"yes ({explanations.index(d.known) + 1})"
        table.add_row(
            str(d.index),
            str(d.step),
            d.api,
            d.tag or "",
            d.what,
            *(str(getattr(d, value)) for value in values),
            known,
        )
    console.print(table)
    for number, explanation in enumerate(explanations, start=1):
        console.print(f"({number}) {explanation}", highlight=False)
    verdict = "only known divergences" if result.conforms else "UNEXPLAINED differences"
    if result.versions:
        verdict += f", {len(result.versions)} version difference(s) between the two Kafkas"
    console.print(f"{result.flow}: {verdict}")
