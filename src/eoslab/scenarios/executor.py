"""One scenario on one target: topic, workload ∥ nemesis, heal, run.json.

The lab is left as it was found, whatever happens: the nemesis heals in a `finally`, and
the producers are stopped before the run directory is closed.
"""

from __future__ import annotations

import sys
import time
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
from eoslab.rundir import (
    REPLICATION,
    GroupProtocol,
    HandlerMode,
    LabTarget,
    RunDir,
    RunInfo,
    Target,
    cell_name,
    lab_target,
    new_run_id,
)
from eoslab.runtime.lab import ProcessFaults
from eoslab.runtime.postgres import LAB_SINK, lab_sink
from eoslab.runtime.topology import LabConfig
from eoslab.scenarios.schema import Scenario
from eoslab.settings import BasePort
from eoslab.workload.consumer_spec import ConsumerWorkloadSpec
from eoslab.workload.consumer_workload import SETTLE_TIMEOUT_S, ConsumerWorkload
from eoslab.workload.supervisor import Workload

# On a cluster the lab does not run, only what needs no runtime, proxy or refbroker API.
EXTERNAL_STEP_KINDS = {
    "producer-crash",
    "probe",
    "consumer-crash",
    "consumer-pause",
    "consumer-join",
}
CAUGHT_UP_POLL_S = 0.5


class RunError(RuntimeError):
    """The run could not be carried out as the scenario says."""


@dataclass(frozen=True)
class RunResult:
    run_dir: RunDir
    info: RunInfo
    problems: list[str]
    """What went wrong on the way (nemesis errors, heal failures, timeouts); empty if none."""


def bootstrap_of(target: LabTarget, config: LabConfig) -> str:
    return config.bootstrap(target)


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


def _where(
    scenario: Scenario, target: str, bootstrap: str | None
) -> tuple[Target, LabTarget, str | None]:
    """The run's target, the lab target whose timeline and expectations it follows (an external
    cluster follows Kafka's), and the bootstrap servers when the user named them."""
    if target == "external":
        return "external", "kafka", _check_external(scenario, bootstrap)
    if bootstrap:
        raise RunError("--bootstrap goes with --target external (the lab's targets are known)")
    try:
        as_target = lab_target(target)
    except ValueError as error:
        raise RunError(f"{error}, or external") from None
    if as_target not in scenario.targets:
        raise RunError(
            f"scenario {scenario.name} does not apply to target {target!r} "
            f"(targets: {', '.join(scenario.targets)})"
        )
    return as_target, as_target, None


def _with_protocol(
    spec: ConsumerWorkloadSpec | None, protocol: GroupProtocol | None, target: str
) -> ConsumerWorkloadSpec | None:
    """The consumer workload with its group protocol chosen; the consumer protocol (KIP-848)
    only where a broker speaks it: Kafka 4, or a cluster the user names."""
    if protocol is None:
        chosen = None if spec is None else spec.group_protocol
    elif spec is None:
        raise RunError("--group-protocol goes with consumers (a consumer scenario, or --mode)")
    else:
        chosen, spec = protocol, spec.model_copy(update={"group_protocol": protocol})
    if chosen == "consumer" and target not in ("kafka4", "external"):
        raise RunError(
            f"the consumer group protocol (KIP-848) needs Kafka 4: target kafka4, not {target}"
        )
    return spec


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
    mode: HandlerMode | None = None,
    sink: str | None = None,
    group_protocol: GroupProtocol | None = None,
) -> RunResult:
    """Run `scenario` on `target`; for target "external", `bootstrap` names the cluster. With
    a handler ``mode`` the run has a consumer workload in that mode (the scenario's own, else the
    default one); ``sink`` is its database: a PostgreSQL URL, ``lab`` for a database of its own
    on the lab's PostgreSQL, else SQLite in the run directory; ``group_protocol`` its consumer
    group protocol (default: the workload's, classic)."""
    run_target, as_target, bootstrap = _where(scenario, target, bootstrap)
    seed = scenario.seed if seed is None else seed
    workload_spec = scenario.workload
    if records is not None:
        workload_spec = workload_spec.model_copy(update={"records": records})
    consumer_spec = _with_protocol(scenario.consumer_workload(mode), group_protocol, run_target)
    mode = None if consumer_spec is None else consumer_spec.mode
    protocol = "classic" if consumer_spec is None else consumer_spec.group_protocol
    run_id = new_run_id(cell_name(scenario.name, mode, protocol), target)
    if consumer_spec is not None and sink is not None:
        if sink == LAB_SINK:
            sink = lab_sink(config.postgres_root, config.port(BasePort.POSTGRES), run_id)
        consumer_spec = consumer_spec.model_copy(update={"sink": sink})
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
        expected=scenario.expected.for_run(as_target, mode),
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
    consumers = (
        None
        if consumer_spec is None
        else ConsumerWorkload(
            consumer_spec,
            run_dir=run_dir,
            run_id=run_id,
            bootstrap=bootstrap,
            topic=topic,
            partitions=partitions,
            seed=seed,
        )
    )
    done = WorkloadsDone(workload, consumers)
    nemesis = Nemesis(
        run_dir=run_dir,
        target=as_target,
        runtime=runtime,
        bootstrap=bootstrap,
        topic=topic,
        proxy=ProxyControl(config.proxy_control_url),
        refbroker=RefbrokerControl(config.refbroker_control_url) if config.with_refbroker else None,
        workload=workload,
        consumers=consumers,
    )
    timeline = TimelineRunner(
        resolve(scenario.nemesis, as_target, seed),
        nemesis,
        acked=lambda: workload.acked,
        workload_done=done,
    )
    problems = _play(
        workload=workload,
        consumers=consumers,
        nemesis=nemesis,
        timeline=timeline,
        done=done,
        timeout_s=scenario.timeout_s,
        show_progress=show_progress,
    )
    info = info.model_copy(
        update={
            "ended_ms": now_ms(),
            "sessions": workload.sessions,
            "consumption": None if consumers is None else consumers.info(),
        }
    )
    run_dir.write_info(info)
    return RunResult(run_dir, info, problems)


def _play(
    *,
    workload: Workload,
    consumers: ConsumerWorkload | None,
    nemesis: Nemesis,
    timeline: TimelineRunner,
    done: WorkloadsDone,
    timeout_s: float,
    show_progress: bool | None,
) -> list[str]:
    """Workloads ∥ timeline until done (bounded), then stop, heal and collect what went wrong;
    the lab is left healed whatever happens."""
    problems: list[str] = []
    try:
        if consumers is not None:
            consumers.start()
            if not consumers.wait_settled():
                problems.append(
                    f"the consumer group did not form within {SETTLE_TIMEOUT_S:g} s: "
                    "the records were produced to an incomplete group"
                )
        workload.start()
        timeline.start()
        _wait(
            lambda: done() and not timeline.is_alive(),
            timeout_s,
            workload,
            workload.spec.records,
            show_progress,
        )
        if not done() or timeline.is_alive():
            problems.append(f"the run did not finish within timeout_s={timeout_s}")
    finally:
        timeline.stop()
        timeline.join(timeout=60)
        workload.stop()
        problems += nemesis.errors
        problems += nemesis.heal()
        if consumers is not None:
            consumers.stop()
            problems += consumers.failures()
        if timeline.error is not None:
            problems.append(f"nemesis timeline: {timeline.error}")
        problems += workload.failures()
    return problems


class WorkloadsDone:
    """Whether a run's workloads are done: the producers have finished and, with a consumer
    workload, the group has committed up to where the producers left every partition. Asked
    every few milliseconds; asks the group's coordinator at most every CAUGHT_UP_POLL_S."""

    def __init__(self, workload: Workload, consumers: ConsumerWorkload | None) -> None:
        self._workload = workload
        self._consumers = consumers
        self._ends: dict[int, int] | None = None
        self._asked = -CAUGHT_UP_POLL_S
        self._caught_up = False

    def __call__(self) -> bool:
        if not self._workload.finished:
            return False
        if self._consumers is None or self._caught_up:
            return True
        if time.monotonic() - self._asked >= CAUGHT_UP_POLL_S:
            self._asked = time.monotonic()
            if self._ends is None:
                self._ends = self._consumers.end_offsets()
            self._caught_up = self._consumers.caught_up(self._ends)
        return self._caught_up


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
