"""`eoslab verify RUN_DIR`: check a run and print its verdict.

Exit codes as every command that judges runs: 0 the run conforms, 2 it does not, 3 it is
invalid, 1 it could not be checked (the run directory or a suite is unusable, or Spark failed:
one line says why, and where Spark's log is).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from confluent_kafka import KafkaException
from pydantic import ValidationError
from rich.table import Table

from eoslab.console import console, fail
from eoslab.rundir import RunDir, RunDirError, Verdict
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.spark import DEFAULT_MASTER
from eoslab.runtime.topology import SPARK_CONNECT_SERVICE
from eoslab.verify.verdict import ExpectationError

app = typer.Typer(help="Check a run: anomalies, GX suites, verdict.", no_args_is_help=True)


@app.command()
def verify(
    run_dir: Annotated[
        Path,
        typer.Argument(exists=True, file_okay=False, help="The run directory (holds run.json)."),
    ],
    remote: Annotated[
        str | None,
        typer.Option(
            help="Spark Connect server (sc://HOST:PORT); default: $EOSLAB_SPARK_REMOTE, else "
            "the lab's warm Spark when it is up."
        ),
    ] = None,
    master: Annotated[
        str | None,
        typer.Option(
            help=f"Start a Spark of its own on this master instead (e.g. {DEFAULT_MASTER}); "
            "the default when no Spark Connect server is up."
        ),
    ] = None,
    bootstrap: Annotated[
        str | None,
        typer.Option(help="Read the topic from these bootstrap servers instead (--from-topic)."),
    ] = None,
    from_topic: Annotated[
        bool,
        typer.Option(
            "--from-topic",
            help="Read the topic again, not the copy of its log the run directory keeps.",
        ),
    ] = False,
) -> None:
    """Read the run's log (the run directory's copy, RUN_DIR/topic/, once a check has read the
    topic; the topic itself through Spark's Kafka source the first time) and history, derive
    every anomaly, validate the GX suites and write RUN_DIR/checker/verdict.json."""
    # Spark and GX load in seconds: only when a run is checked, not for every `eoslab` command.
    from pyspark.errors import PySparkException

    from eoslab.verify.checker import verify_run
    from eoslab.verify.spark_session import answers, default_remote, spark_failure
    from eoslab.verify.suites import SuiteFileError
    from eoslab.verify.topic_reader import TopicGoneError, require_topic

    from_topic = from_topic or bootstrap is not None
    remote = None if master else remote or default_remote()
    if remote and not answers(remote):
        raise fail(f"no Spark Connect server answers at {remote}")
    run = RunDir(run_dir)
    if not run.run_json.is_file():
        raise fail(f"{run.run_json}: not found: {run_dir} is not a run directory")
    try:  # before a Spark starts: a run that cannot be read is told in a second
        require_topic(run, run.read_info(), bootstrap=bootstrap, from_topic=from_topic)
    except (TopicGoneError, RunDirError, ValidationError, FileNotFoundError) as error:
        raise fail(error) from error
    except KafkaException as error:
        raise fail(f"cannot read the run's topic: {error.args[0].str()}") from None
    if remote:
        console.print(f"checking on the Spark Connect server {remote}")
    else:
        why = "" if master else "; no warm Spark is up"
        console.print(f"checking on a Spark of its own ({master or DEFAULT_MASTER}{why})")
    if not from_topic and run.has_topic_snapshot:
        console.print(f"the log: the copy in {run.topic_dir} (--from-topic: the topic)")
    try:
        verdict = verify_run(
            run_dir, master=master, bootstrap=bootstrap, remote=remote, from_topic=from_topic
        )
    except (
        ExpectationError,
        SuiteFileError,
        FileNotFoundError,
        TopicGoneError,
        RunDirError,
        ValidationError,
    ) as error:
        raise fail(error) from error
    except PySparkException as error:
        raise fail(f"Spark: {spark_failure(error)} ({_spark_log(remote)})") from None
    print_verdict(verdict)
    if not verdict.conforms:
        raise typer.Exit(code=verdict.status.exit_code)


def _spark_log(remote: str | None) -> str:
    """Where Spark logged its side of a failed check."""
    if remote is None:
        return "Spark's log: above, this command's own Spark"
    lab = LocalRuntime()
    if remote == lab.config.spark_remote:
        return f"Spark's log: {lab.log_path(SPARK_CONNECT_SERVICE)}"
    return f"Spark's log: the Spark Connect server's at {remote}"


def print_verdict(verdict: Verdict) -> None:
    # the title on a line of its own: a table's title wraps at the table's (narrow) width,
    # breaking the run id mid-word
    console.print(f"verdict of {verdict.run_id} ({verdict.scenario} on {verdict.target})")
    table = Table()
    for column in ("check", "expected", "observed", ""):
        table.add_column(column)
    for check in verdict.checks:
        mark = "[green]ok[/]" if check.conforms else "[red]MISMATCH[/]"
        table.add_row(check.name, check.expected, str(check.observed), mark)
    console.print(table)
    gx = verdict.gx
    console.print(
        f"GX suites: {'passed' if gx.success else 'failed'}"
        + ("" if gx.agrees_with_anomalies else " [red](disagree with the anomaly tables)[/]")
        + f"; Data Docs: {verdict.links.data_docs}",
        soft_wrap=True,  # a path is not wrapped
    )
    if verdict.naive is not None:
        console.print(
            f"naive checker beside Spark: agrees on {len(verdict.naive.compared)} counts"
            if verdict.naive.agrees
            else "naive checker beside Spark: [red]disagrees[/] on "
            + ", ".join(sorted(verdict.naive.differences)),
            highlight=False,
        )
    for fault in verdict.faults:
        mark = "[green]took effect[/]" if fault.took_effect else "[red]NO EFFECT[/]"
        console.print(f"fault {fault.summary}  {mark}", highlight=False)
    for reason in verdict.invalid:
        console.print(f"[red]invalid:[/] {reason}", highlight=False)
    colour = "green" if verdict.conforms else "red"
    console.print(f"[bold {colour}]{verdict.status}[/]")
