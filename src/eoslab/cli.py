"""The `eoslab` command."""

from __future__ import annotations

import json
import signal
import sys
import uuid
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from eoslab.admin import create_topic
from eoslab.clock import now_ms
from eoslab.console import (
    JsonOption,
    RuntimeOption,
    console,
    count_option,
    fail,
    identifier_column,
)
from eoslab.orchestration.bisect_command import bisect
from eoslab.orchestration.command import app as orchestrate_app
from eoslab.probe.command import app as probe_app
from eoslab.proxy.command import app as chaos_app
from eoslab.refbroker.command import app as refbroker_app
from eoslab.report.command import app as report_app
from eoslab.rundir import LAB_TARGETS, REPLICATION
from eoslab.runtime import LabError, compose_lab_in, get_runtime, processes
from eoslab.runtime import prune as prune_lib
from eoslab.runtime import smoke as smoke_lib
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.spark_cluster import SparkClusterError, StandaloneCluster
from eoslab.runtime.status import ClusterView, LabStatus
from eoslab.runtime.topology import CLUSTER_TITLES, LabConfig, parse_targets
from eoslab.scenarios import command as scenarios_command
from eoslab.settings import TARGETS, BasePort, runs_root
from eoslab.verify import command as verify_command
from eoslab.workload.drivers import command as clients_command

WARMUP_MODULE = "eoslab.orchestration.warmup"
"""Run as a module, not imported: the CLI starts without pyspark."""

app = typer.Typer(
    help="eoslab: a conformance lab for Kafka's idempotent producer.", no_args_is_help=True
)
lab_app = typer.Typer(help="Bring the lab up and down, and break it.", no_args_is_help=True)
app.add_typer(lab_app, name="lab")
app.add_typer(refbroker_app, name="refbroker", help="The Python reference broker.")
app.add_typer(chaos_app, name="chaos", help="The chaos proxy and its faults.")
app.add_typer(
    probe_app, name="probe", help="Crafted Produce flows from the seeds, on both targets."
)
app.add_typer(scenarios_command.app, name="scenarios", help="The scenario catalogue.")
app.command("run")(scenarios_command.run)
app.command("verify")(verify_command.verify)
app.command("bisect")(bisect)
app.add_typer(report_app, name="report", help="Reports: HTML, summary.json, junit.xml.")
app.add_typer(
    clients_command.app,
    name="clients",
    help="The Kafka clients every role runs on (librdkafka, Kafka's Java client, franz-go).",
)
app.add_typer(
    orchestrate_app, name="orchestrate", help="Airflow in the lab: the matrix now, its environment."
)

ServiceArgument = Annotated[
    str, typer.Argument(help="A service, e.g. kafka-2, kafka4-1, zookeeper, refbroker.")
]


@lab_app.command()
def up(
    targets: Annotated[
        str | None,
        typer.Option(
            "--targets",
            envvar=TARGETS,
            help=f"Only these targets, comma-separated (default: all, {','.join(LAB_TARGETS)}).",
        ),
    ] = None,
    runtime: RuntimeOption = "local",
) -> None:
    """Start the targets' clusters (ZooKeeper and three Kafka 3.9 brokers, three Kafka 4 KRaft
    nodes, the reference broker), the chaos proxy, the consumers' PostgreSQL, the warm Spark
    and Airflow."""
    try:
        chosen = None if targets is None else parse_targets(targets.split(","))
        lab = get_runtime(runtime, None if chosen is None else LabConfig(targets=chosen))
        status = lab.up()
    except (LabError, KeyError, ValueError) as error:
        raise fail(error) from error
    _print_status(status, full=False)
    from eoslab.runtime.compose import ComposeRuntime  # here: no other command loads Docker's SDK

    if isinstance(lab, LocalRuntime) and lab.config.with_spark_connect:
        _warm_up_spark(lab)
    if isinstance(lab, ComposeRuntime) and lab.config.with_spark_connect:
        console.print(lab.warm_up_spark(), soft_wrap=True)
    if isinstance(lab, LocalRuntime | ComposeRuntime) and lab.config.with_airflow:
        console.print(lab.airflow().login_banner())
    reached = "".join(
        f"\n  {CLUSTER_TITLES[target]}: [bold]{view.bootstrap}[/]"
        for target, view in status.clusters.items()
    )
    console.print(
        f"\nThe lab is up.{reached}\nStop it with [bold]make lab down[/] (or `eoslab lab down`).",
        soft_wrap=True,
    )


def _warm_up_spark(lab: LocalRuntime) -> None:
    """One check in the background (:mod:`eoslab.orchestration.warmup`, bounded), so that the
    warm Spark is warm by the first real check. Started as one of the lab's processes: ``lab down``
    stops it with the rest if it is still running."""
    log = lab.log_path("spark-warmup")
    argv = [sys.executable, "-m", WARMUP_MODULE]
    processes.spawn("spark-warmup", argv, log, lab.config.state_dir, env={})
    console.print(f"The warm Spark is warming up in the background (log: {log}).", soft_wrap=True)


@lab_app.command()
def down(
    purge: Annotated[
        bool, typer.Option(help="Also wipe the lab's state folder (data, logs).")
    ] = False,
    runtime: RuntimeOption = "local",
) -> None:
    """Stop every service of the lab; nothing keeps running (a compose lab in the lab folder
    too, whatever the runtime)."""
    try:
        lab = get_runtime(runtime)
        if lab.name != "compose" and compose_lab_in(lab.config.state_dir):
            get_runtime("compose").down(purge=purge)
        lab.down(purge=purge)
    except LabError as error:
        raise fail(error) from error
    console.print("The lab is down." + (" Its state is wiped." if purge else ""))


@lab_app.command()
def status(
    as_json: JsonOption = False,
    runtime: RuntimeOption = "local",
) -> None:
    """Each service with pid, ports and health; the controller; leaders and ISRs."""
    try:
        lab_status = get_runtime(runtime).status()
    except LabError as error:
        raise fail(error) from error
    if as_json:
        typer.echo(json.dumps(lab_status.to_json(), indent=2))
    else:
        _print_status(lab_status)
    if not lab_status.up:
        raise typer.Exit(code=3)


@lab_app.command()
def logs(
    service: ServiceArgument,
    lines: Annotated[int, count_option("How many of the last lines.", "-n", "--lines")] = 50,
    runtime: RuntimeOption = "local",
) -> None:
    """The last lines of a service's log."""
    try:
        typer.echo(get_runtime(runtime).logs(service, lines))
    except (LabError, KeyError) as error:
        raise fail(error) from error


@lab_app.command()
def smoke(
    records: Annotated[int, count_option("Records per target.")] = 3000,
    runtime: RuntimeOption = "local",
) -> None:
    """Produce idempotently to each target, read back, and check: complete, once, in order."""
    config = get_runtime(runtime).config
    targets = {target: config.bootstrap(target) for target in config.targets}
    table = Table(title="smoke check")
    for column in ("target", "acked", "read", "lost", "duplicates", "reordered", "verdict"):
        table.add_column(column)
    failed = False
    for target, bootstrap in targets.items():
        topic = f"smoke-{uuid.uuid4().hex[:8]}"
        try:
            create_topic(bootstrap, topic, partitions=3, replication=REPLICATION[target])
            ledger = smoke_lib.produce(bootstrap, topic, partitions=3, count=records)
            found = smoke_lib.check(ledger, smoke_lib.consume(bootstrap, topic, partitions=3))
        except Exception as error:
            table.add_row(target, "-", "-", "-", "-", "-", f"[red]error: {error}[/]")
            failed = True
            continue
        failed |= not found.ok
        verdict = "[green]ok[/]" if found.ok else "[red]FAIL[/]"
        table.add_row(
            target,
            str(found.acked),
            str(found.read),
            str(len(found.lost)),
            str(len(found.duplicates)),
            str(len(found.reordered)),
            verdict,
        )
    console.print(table)
    if failed:
        raise typer.Exit(code=1)


@lab_app.command()
def prune(
    *,
    older_than: Annotated[
        str | None, typer.Option(help="Runs that started longer ago than this: 7d, 12h, 30m.")
    ] = None,
    keep_last: Annotated[
        int | None, count_option("Keep the newest N runs (with --older-than: both).")
    ] = None,
    runs: Annotated[
        bool, typer.Option("--runs", help="Also delete the run directories, with their topics.")
    ] = False,
    force: Annotated[
        bool,
        typer.Option(help="Also delete the topics of runs never checked (no copy of their log)."),
    ] = False,
    external: Annotated[
        bool,
        typer.Option(
            help="Also delete old external runs' topics on the clusters they ran on (their "
            "eos-<run id> topics only, at the bootstrap each run was given)."
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option(help="Say what would be deleted; delete nothing.")
    ] = False,
    runtime: RuntimeOption = "local",
) -> None:
    """Delete old runs' topics from the lab's clusters (a checked run keeps a copy of its log
    and re-checks without them), and with --runs their run directories."""
    try:
        config = get_runtime(runtime).config
        old = prune_lib.old_runs(
            prune_lib.find_runs(runs_root()),
            now_ms=now_ms(),
            older_than_ms=None if older_than is None else prune_lib.parse_duration_ms(older_than),
            keep_last=keep_last,
        )
    except (LabError, ValueError) as error:
        raise fail(error) from error
    results = prune_lib.prune(
        config, old, delete_run_dirs=runs, force=force, external=external, dry_run=dry_run
    )
    table = Table(title="prune" + (" (dry run: nothing deleted)" if dry_run else ""))
    for column in ("run", "target", "topic", "run directory"):
        table.add_column(column)
    for pruned in results:
        fate = pruned.fate.value + (f": {pruned.detail}" if pruned.detail else "")
        table.add_row(
            pruned.run_id, pruned.target, fate, "deleted" if pruned.run_dir_deleted else ""
        )
    if results:
        console.print(table)
    deleted = sum(p.fate is prune_lib.TopicFate.DELETED for p in results)
    console.print(f"{len(results)} old run(s); {deleted} topic(s) deleted.")
    if any(p.fate is prune_lib.TopicFate.FAILED for p in results):
        raise typer.Exit(code=1)


@lab_app.command("spark-cluster")
def spark_cluster(
    workers: Annotated[int, count_option("Workers (one core, 1 GB each).")] = 2,
    runtime: RuntimeOption = "local",
) -> None:
    """A standalone Spark cluster on loopback (a master and workers of the pinned Spark), up
    until Ctrl-C: check a run on it with `eoslab verify RUN_DIR --master URL`."""
    config = get_runtime(runtime).config
    cluster = StandaloneCluster(
        config.state_dir / "spark-cluster",
        master_port=config.port(BasePort.SPARK_MASTER),
        ui_port=config.port(BasePort.SPARK_MASTER_UI),
        workers=workers,
    )
    try:
        cluster.start()
    except SparkClusterError as error:
        raise fail(error) from error
    console.print(
        f"Spark master {cluster.url} with {workers} worker(s); logs in {cluster.folder}. "
        f"Check a run: eoslab verify RUN_DIR --master {cluster.url}. Ctrl-C stops it.",
        soft_wrap=True,
    )
    stops = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)  # taken by sigwait, not by a handler
    try:
        signal.sigwait(stops)
    finally:
        cluster.stop()
    console.print("The Spark cluster is down.")


def _verb(name: str, doc: str) -> None:
    def command(service: ServiceArgument, runtime: RuntimeOption = "local") -> None:
        try:
            getattr(get_runtime(runtime), name)(service)
        except (LabError, KeyError) as error:
            raise fail(error) from error
        console.print(f"{name}: {service}")

    command.__doc__ = doc
    lab_app.command(name=name)(command)


_verb("kill", "kill -9 a service (a crash: no shutdown).")
_verb("pause", "SIGSTOP a service (it freezes; its sockets stay open).")
_verb("resume", "SIGCONT a paused service.")
_verb("restart", "Stop a service cleanly and start it again with the same data.")


def _print_status(status: LabStatus, *, full: bool = True) -> None:
    """The services, where their logs are, then each cluster: with every port and topic
    partition, or (``full`` False, as ``lab up`` prints it, a line a service) the port a
    user reaches each service on and the topics' count, so that the output stays short and does
    not grow with every run. Nothing a user may copy is cut at 80 columns: the ports are one a
    line, and the log folder is printed once, under the table (`lab status --json` has each
    path)."""
    table = Table(title=f"eoslab lab ({status.runtime}, {status.state_dir})")
    ports = {
        s.name: "\n".join(
            f"{label}={port}"
            for label, port in s.ports.items()
            if full or label == _reached_on(s.ports)
        )
        for s in status.services
    }
    identifier_column(table, "service", [s.name for s in status.services])
    for column in ("state", "health", "pid"):
        table.add_column(column)
    identifier_column(table, "ports" if full else "port", list(ports.values()))
    for service in status.services:
        health = "[green]ok[/]" if service.healthy else "[red]down[/]"
        table.add_row(
            service.name, service.state, health, str(service.pid or "-"), ports[service.name]
        )
    console.print(table)
    logs = {Path(s.log).parent for s in status.services if s.log}
    if logs:
        folders = ", ".join(str(folder) for folder in sorted(logs))
        more = "the last lines" if full else "every port and topic: `eoslab lab status`"
        console.print(
            f"Logs: {folders}/<service>.log (`eoslab lab logs SERVICE`); {more}",
            soft_wrap=True,
        )
    for target, view in status.clusters.items():
        _print_cluster(CLUSTER_TITLES[target], view, full)
    if status.removed_cuts:
        console.print(
            f"Removed {len(status.removed_cuts)} cut link(s) a nemesis left behind: "
            + "; ".join(status.removed_cuts),
            soft_wrap=True,
        )
    for cut in status.cuts:
        console.print(f"[yellow]network partition[/]: {cut} is cut", soft_wrap=True)


def _reached_on(ports: dict[str, int]) -> str:
    """The port a user reaches a service on: a broker's advertised one (the proxy's), else its
    first."""
    return "advertised" if "advertised" in ports else next(iter(ports), "")


def _print_cluster(title: str, view: ClusterView, full: bool) -> None:
    if not view.reachable:
        console.print(f"{title} at {view.bootstrap}: [red]unreachable[/]")
        return
    topics = len({p.topic for p in view.partitions})
    console.print(
        f"{title}"
        + (f" at {view.bootstrap}" if full else "")
        + f": brokers {view.brokers}, controller {view.controller}"
        + ("" if full else f", {topics} topics"),
        soft_wrap=True,
    )
    if full and view.partitions:
        table = Table(show_header=True)
        identifier_column(table, "topic", [p.topic for p in view.partitions])
        for column in ("partition", "leader", "replicas", "isr"):
            table.add_column(column)
        for p in view.partitions:
            table.add_row(p.topic, str(p.partition), str(p.leader), str(p.replicas), str(p.isr))
        console.print(table)


if __name__ == "__main__":
    app()
