"""One scenario on one target: topic, workload ∥ nemesis, heal, run.json.

The lab is left as it was found, whatever happens: the nemesis heals in a `finally`, and
the producers are stopped before the run directory is closed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from eoslab.admin import create_topic
from eoslab.clock import now_ms, wait_until
from eoslab.nemesis.nemesis import Nemesis
from eoslab.nemesis.timeline import TimelineRunner, resolve
from eoslab.proxy.control_client import ProxyControl
from eoslab.refbroker.control_client import RefbrokerControl
from eoslab.rundir import REPLICATION, LabTarget, RunDir, RunInfo, Target, lab_target, new_run_id
from eoslab.runtime.lab import ProcessFaults
from eoslab.runtime.topology import LabConfig
from eoslab.scenarios.schema import Scenario
from eoslab.workload.supervisor import Workload

# On a cluster the lab does not run, only what needs no runtime, proxy or refbroker API.
EXTERNAL_STEP_KINDS = {"producer-crash", "probe"}


class RunError(RuntimeError):
    """The run could not be carried out as the scenario says."""


@dataclass(frozen=True)
class RunResult:
    run_dir: RunDir
    info: RunInfo
    problems: list[str]
    """What went wrong on the way (nemesis errors, heal failures, timeouts); empty if none."""


def bootstrap_of(target: LabTarget, config: LabConfig) -> str:
    return config.bootstrap_servers if target == "kafka" else config.refbroker_bootstrap


def _check_external(scenario: Scenario, bootstrap: str | None) -> str:
    """An external cluster is a Kafka cluster the lab neither runs nor proxies."""
    if not bootstrap:
        raise RunError("target external needs the cluster's bootstrap servers (--bootstrap)")
    if "kafka" not in scenario.targets:
        raise RunError(
            f"scenario {scenario.name} is not meant for Kafka, so not for an external one"
        )
    needs_lab = sorted({step.kind for step in scenario.nemesis} - EXTERNAL_STEP_KINDS)
    if needs_lab:
        raise RunError(
            f"scenario {scenario.name} uses {', '.join(needs_lab)}, which need the lab's runtime, "
            "proxy or reference broker; on an external cluster only scenarios without them run "
            f"(nemesis steps among: {', '.join(sorted(EXTERNAL_STEP_KINDS))})"
        )
    return bootstrap


def execute(
    scenario: Scenario,
    target: str,
    *,
    runtime: ProcessFaults,
    config: LabConfig,
    runs_root: Path | None = None,
    seed: int | None = None,
    records: int | None = None,
    show_progress: bool | None = None,
    bootstrap: str | None = None,
    replication: int | None = None,
) -> RunResult:
    """Run `scenario` on `target`; for target "external", `bootstrap` names the cluster."""
    # The timeline and the expectations of an external cluster are those of Kafka.
    as_target: LabTarget = "kafka"
    if target == "external":
        bootstrap = _check_external(scenario, bootstrap)
    elif bootstrap:
        raise RunError("--bootstrap goes with --target external (the lab's targets are known)")
    else:
        try:
            as_target = lab_target(target)
        except ValueError as error:
            raise RunError(f"{error}, or external") from None
        if as_target not in scenario.targets:
            raise RunError(
                f"scenario {scenario.name} does not apply to target {target!r} "
                f"(targets: {', '.join(scenario.targets)})"
            )
    run_target: Target = "external" if target == "external" else as_target
    seed = scenario.seed if seed is None else seed
    workload_spec = scenario.workload
    if records is not None:
        workload_spec = workload_spec.model_copy(update={"records": records})
    run_id = new_run_id(scenario.name, target)
    run_dir = RunDir.for_run(run_id, runs_root).create()
    bootstrap = bootstrap or bootstrap_of(as_target, config)
    topic = f"eos-{run_id}"
    partitions = scenario.topic.partitions
    info = RunInfo(
        run_id=run_id,
        scenario=scenario.name,
        target=run_target,
        bootstrap=bootstrap,
        topic=topic,
        partitions=partitions,
        seed=seed,
        started_ms=now_ms(),
        producer_config=scenario.producer_config,
        expected=scenario.expected.for_target(as_target),
    )
    run_dir.write_info(info)
    create_topic(bootstrap, topic, partitions, replication or REPLICATION[run_target])

    workload = Workload(
        workload_spec,
        run_dir=run_dir,
        run_id=run_id,
        bootstrap=bootstrap,
        topic=topic,
        partitions=partitions,
        seed=seed,
        producer_config=scenario.producer_config,
    )
    nemesis = Nemesis(
        run_dir=run_dir,
        target=as_target,
        runtime=runtime,
        bootstrap=bootstrap,
        topic=topic,
        proxy=ProxyControl(config.proxy_control_url),
        refbroker=RefbrokerControl(config.refbroker_control_url) if config.with_refbroker else None,
        workload=workload,
    )
    timeline = TimelineRunner(
        resolve(scenario.nemesis, as_target, seed),
        nemesis,
        acked=lambda: workload.acked,
        workload_done=lambda: workload.finished,
    )
    problems: list[str] = []
    try:
        workload.start()
        timeline.start()
        total = workload_spec.records
        _wait(
            lambda: workload.finished and not timeline.is_alive(),
            scenario.timeout_s,
            workload,
            total,
            show_progress,
        )
        if not workload.finished or timeline.is_alive():
            problems.append(f"the run did not finish within timeout_s={scenario.timeout_s}")
    finally:
        timeline.stop()
        timeline.join(timeout=60)
        workload.stop()
        problems += nemesis.errors
        problems += nemesis.heal()
        if timeline.error is not None:
            problems.append(f"nemesis timeline: {timeline.error}")
        problems += workload.failures()
        info = info.model_copy(update={"ended_ms": now_ms(), "sessions": workload.sessions})
        run_dir.write_info(info)
    return RunResult(run_dir, info, problems)


def _wait(
    done: Callable[[], bool],
    timeout_s: float,
    workload: Workload,
    total: int | None,
    show_progress: bool | None,
) -> None:
    """Poll until done or the timeout, with a progress bar when a person is watching."""
    if show_progress is None:
        show_progress = sys.stderr.isatty()
    if not show_progress:
        wait_until(done, timeout_s, interval_s=0.1)
        return
    columns = (
        TextColumn("records"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} settled, {task.fields[acked]} acked"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("records", total=total, acked=0)

        def advanced() -> bool:
            progress.update(task, completed=workload.settled, acked=workload.acked)
            return done()

        wait_until(advanced, timeout_s, interval_s=0.1)
