"""`eoslab bisect`: run a client-bug scenario across a range of client releases and say which
release fixed it (:mod:`eoslab.orchestration.bisect`), every step a real cell."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from eoslab.clients import ClientError, ClientRef
from eoslab.console import RuntimeOption, console, count_option, fail
from eoslab.orchestration.bisect import Side, Step, existing_step, folder_name, search
from eoslab.report.render import write_bisect_report
from eoslab.rundir import HandlerMode, VerdictStatus
from eoslab.runtime import LabError, get_runtime
from eoslab.scenarios.catalogue import ScenarioError, find_scenario
from eoslab.scenarios.executor import RunError, execute
from eoslab.settings import runs_root
from eoslab.workload.drivers.releases import within

DEFAULT_MAX_STEPS = 8
SIDES = {VerdictStatus.CONFORMS: Side.FIXED, VerdictStatus.DOES_NOT_CONFORM: Side.BROKEN}


def bisect(
    scenario: Annotated[str, typer.Argument(help="A catalogue scenario about a client bug.")],
    *,
    target: Annotated[str, typer.Option(help="kafka, kafka4 or refbroker.")],
    client_range: Annotated[
        str,
        typer.Option(
            "--client",
            help="FAMILY:LOW..HIGH, e.g. java:2.7.0..3.9.1, franz-go:v1.20.0..v1.22.3, "
            "librdkafka:2.2.0..2.16.1 (the releases its registry lists between them).",
        ),
    ],
    max_steps: Annotated[int, count_option("Cells to run at most.")] = DEFAULT_MAX_STEPS,
    records: Annotated[int | None, count_option("Records per cell.")] = None,
    mode: Annotated[
        HandlerMode | None, typer.Option(help="Consumers in this handler mode.")
    ] = None,
    runtime: RuntimeOption = "local",
) -> None:
    """Which release of a client fixed the bug SCENARIO shows: runs it on releases of the range
    (its ends first, then the newest patch of each minor, then bisecting), each a real cell judged
    by the scenario's expectations for a client without the bug; prints the first release that
    conforms and the last that does not, and writes reports/bisect/<name>/. Cells of an earlier
    bisection of the same range are reused. Exits 0 when the boundary was found exactly."""
    try:
        loaded = find_scenario(scenario)
        releases = within(client_range)
        lab = get_runtime(runtime)
    except (ScenarioError, ClientError, LabError) as error:
        raise fail(error) from error
    # the checker (and Great Expectations, seconds of import) loads when a bisection runs,
    # not with every `eoslab` command
    from eoslab.verify.checker import verify_run

    name = folder_name(loaded.name, target, releases[0], releases[-1])
    folder = runs_root() / "bisect" / name
    console.print(
        f"bisect: {loaded.name} on {target}, {len(releases)} releases in {client_range}; "
        f"cells in {folder}",
        soft_wrap=True,
    )

    def earlier(release: ClientRef) -> Step | None:
        step = existing_step(folder, release)
        if step is not None:
            console.print(f"  {release}: {step.side} (an earlier bisection's)", highlight=False)
        return step

    def judge(release: ClientRef) -> Step:
        console.print(f"  {release}: running", highlight=False)
        try:
            result = execute(
                loaded,
                target,
                runtime=lab,
                config=lab.config,
                runs_root=folder,
                records=records,
                mode=mode,
                client=str(release),
                as_fixed=True,
                show_progress=False,
            )
            verdict = verify_run(result.run_dir.path)
        except (RunError, ClientError, LabError) as error:
            return Step(release, Side.UNKNOWN, str(error))
        side = SIDES.get(verdict.status, Side.UNKNOWN)
        detail = "; ".join([*verdict.invalid, *(m.summary for m in verdict.mismatches)])
        console.print(f"  {release}: {side}", highlight=False)
        return Step(release, side, detail or str(verdict.status), str(result.run_dir.path))

    outcome = search(releases, judge, max_steps, earlier)
    table = Table(title=f"bisect {loaded.name} on {target}")
    for column in ("release", "verdict", "detail"):
        table.add_column(column)
    for step in outcome.steps:
        table.add_row(str(step.release), str(step.side), step.detail)
    console.print(table)
    summary = {
        "scenario": loaded.name,
        "target": target,
        "range": client_range,
        **outcome.to_json(),
    }
    index = write_bisect_report(name, summary)
    console.print(f"{outcome.conclusion}. Report: {index}", soft_wrap=True)
    if not outcome.found:
        raise typer.Exit(code=1)
