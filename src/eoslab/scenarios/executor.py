"""One scenario on one target, in four phases: **plan** (what the run will be, refused before
anything starts if it cannot be what the scenario says), **start** (client, run directory,
fronting proxy, consumers' sink, context, run.json, topics, the reference broker's profile,
workloads, nemesis and timeline, broker configs: each a small function of what the ones before
it made), **play** (workloads ∥ timeline, bounded) and **finish** (stop, heal, judge every
fault, write run.json).

The lab is left as it was found, whatever happens: the nemesis heals and the broker profile is
cleared in a `finally`, and the producers are stopped before the run directory is closed.

A transactional workload (``workload.transactions``) gets its readers too
(:class:`~eoslab.workload.reader.TopicReaders`): one consumer per isolation level reads the
topic live from before the first send, and on to the end once the producers have stopped and
the lab is healed; a reader that could not reach the end makes the run invalid. With a copier
stage (``workload.copy``) the copiers (:class:`~eoslab.workload.copy.workload.CopierWorkload`)
copy the topic to ``<topic>.copy`` beside the producers and, once the readers are done (no
transaction open in the input), copy on to its end and exit; one that cannot makes the run
invalid.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from eoslab.admin import (
    BrokerConfigError,
    create_topic,
    restore_broker_configs,
    set_broker_configs,
)
from eoslab.clients import ClientError, ClientLaunch, ClientRef, parse_client
from eoslab.clock import now_ms, wait_until
from eoslab.nemesis.nemesis import Nemesis
from eoslab.nemesis.steps.base import ResolvedStep
from eoslab.nemesis.timeline import TimelineRunner, resolve
from eoslab.proxy.control_client import ProxyControl
from eoslab.refbroker.control_client import RefbrokerControl
from eoslab.run_context import RunContext
from eoslab.rundir import (
    REPLICATION,
    GroupProtocol,
    HandlerMode,
    LabTarget,
    RunDir,
    RunInfo,
    Target,
    TransactionsInfo,
    cell_name,
    lab_target,
    new_run_id,
    run_topic,
)
from eoslab.runtime.fronting import FrontingError, FrontingProxy
from eoslab.runtime.lab import ProcessFaults
from eoslab.runtime.postgres import LAB_SINK, lab_sink
from eoslab.runtime.topology import LabConfig
from eoslab.runtime.versions import broker_version
from eoslab.scenarios.schema import Scenario
from eoslab.settings import BasePort
from eoslab.workload.consumer.spec import ConsumerWorkloadSpec
from eoslab.workload.consumer.workload import SETTLE_TIMEOUT_S, ConsumerWorkload
from eoslab.workload.copy.workload import CopierWorkload, output_topic
from eoslab.workload.drivers.registry import check_config, default_client, prepare
from eoslab.workload.reader import TopicReaders
from eoslab.workload.spec import WorkloadSpec
from eoslab.workload.supervisor import Workload

# On a cluster the lab does not run, only what needs no runtime or refbroker API, and the
# proxy's faults through a fronting proxy the run starts (FRONTED_STEP_KINDS).
EXTERNAL_STEP_KINDS = {
    "producer-crash",
    "producer-zombie",
    "probe",
    "consumer-crash",
    "consumer-pause",
    "consumer-join",
}
FRONTED_STEP_KINDS = {"proxy"}
EXPECTED_AS = ("kafka", "kafka4")
"""The lab targets an external cluster can be judged as."""
CAUGHT_UP_POLL_S = 0.5
STABLE_MARGIN_S = 30.0
"""Beyond transaction.timeout.ms, how long a run waits for its topic to have no transaction
open before its readers read to the end."""


class RunError(RuntimeError):
    """The run could not be carried out as the scenario says."""


@dataclass(frozen=True)
class RunResult:
    run_dir: RunDir
    info: RunInfo
    problems: list[str]
    """What went wrong on the way (nemesis errors, heal failures, timeouts); empty if none."""

    @property
    def invalid_because(self) -> list[str]:
        """Why the run does not test what its scenario says (problems, faults without effect)."""
        return self.info.invalid_because()


# ================================================================================ plan
@dataclass(frozen=True)
class RunPlan:
    """Everything a run will be, decided before anything starts."""

    scenario: Scenario
    target: Target
    lab_target: LabTarget
    """The lab target whose timeline, expectations and services the run follows."""
    bootstrap: str | None
    """The cluster's bootstrap servers when the user named them (target external)."""
    seed: int
    workload: WorkloadSpec
    consumers: ConsumerWorkloadSpec | None
    client: str | None
    """The client the roles run (``java:3.9.2``) when it is not the workload's own librdkafka."""
    as_fixed: bool
    """Judged by the scenario's expectations without its clients' overrides (``eoslab bisect``:
    does this release behave as one without the bug)."""
    steps: list[ResolvedStep]

    @property
    def fronted(self) -> bool:
        """An external run with proxy faults: its clients go through a fronting proxy."""
        return self.target == "external" and any(
            step.kind in FRONTED_STEP_KINDS for step in self.steps
        )

    @property
    def mode(self) -> HandlerMode | None:
        return None if self.consumers is None else self.consumers.mode

    @property
    def group_protocol(self) -> GroupProtocol:
        return "classic" if self.consumers is None else self.consumers.group_protocol


def plan(
    scenario: Scenario,
    target: str,
    *,
    seed: int | None = None,
    records: int | None = None,
    mode: HandlerMode | None = None,
    client: str | None = None,
    group_protocol: GroupProtocol | None = None,
    bootstrap: str | None = None,
    expect_as: str | None = None,
    as_fixed: bool = False,
) -> RunPlan:
    """The run of ``scenario`` on ``target``; RunError naming the reason when it could not be
    what the scenario says (an unknown target, a trigger the run would never reach, a client
    the scenario does not name). An external run follows ``expect_as``'s timeline and
    expectations (a lab target; default kafka)."""
    run_target, as_target, bootstrap = _where(scenario, target, bootstrap, expect_as)
    if records is not None and records < 1:
        raise RunError(f"records: {records} is not a positive record count")
    workload = scenario.workload
    if records is not None:
        workload = workload.model_copy(update={"records": records})
    consumers = _with_protocol(scenario.consumer_workload(mode), group_protocol, run_target)
    shape = scenario.shape(workload, consumers)
    for index, step in enumerate(scenario.nemesis):
        if step.on is not None and as_target not in step.on:
            continue
        reason = step.unreachable(shape)
        if reason is not None:
            raise RunError(f"{scenario.name}: nemesis.{index}.{reason}")
    ref = _client(client, scenario, consumers)
    return RunPlan(
        scenario=scenario,
        target=run_target,
        lab_target=as_target,
        bootstrap=bootstrap,
        seed=scenario.seed if seed is None else seed,
        workload=workload,
        consumers=consumers,
        client=None if ref is None else str(ref),
        as_fixed=as_fixed,
        steps=resolve(scenario.nemesis, as_target, scenario.seed if seed is None else seed),
    )


def _client(
    client: str | None, scenario: Scenario, consumers: ConsumerWorkloadSpec | None
) -> ClientRef | None:
    """The run's client (None: the workload's own librdkafka); RunError for a name that is not a
    client's, or a scenario property the client has no equivalent for."""
    if client is None:
        return None
    try:
        ref = parse_client(client)
        check_config(
            ref, scenario.producer_config, None if consumers is None else consumers.consumer_config
        )
    except ClientError as error:
        raise RunError(f"{scenario.name}: {error}") from None
    return None if ref == default_client() else ref


def _check_external(scenario: Scenario, bootstrap: str | None, expect_as: str | None) -> LabTarget:
    """An external cluster is a Kafka cluster the lab does not run: its proxy faults go
    through a fronting proxy the run starts, its brokers' processes are out of reach. It is
    judged as Kafka 3.9 (``kafka``) or, asked, as Kafka 4 (``kafka4``): the lab target whose
    timeline and expectations it follows."""
    if not bootstrap:
        raise RunError("target external needs the cluster's bootstrap servers (--bootstrap)")
    as_target = expect_as or "kafka"
    if as_target not in EXPECTED_AS:
        raise RunError(
            f"--expect-as {as_target!r}: an external cluster is judged as "
            f"{' or '.join(EXPECTED_AS)} (the Kafka whose expectations apply)"
        )
    if as_target not in scenario.targets:
        raise RunError(
            f"scenario {scenario.name} is not meant for {as_target}, so not for an external "
            "cluster judged as it"
        )
    playable = EXTERNAL_STEP_KINDS | FRONTED_STEP_KINDS
    needs_lab = sorted({step.kind for step in scenario.nemesis} - playable)
    if needs_lab:
        raise RunError(
            f"scenario {scenario.name} uses {', '.join(needs_lab)}, which need the lab's runtime "
            "or reference broker (the processes and state of brokers it runs); on an external "
            f"cluster only these nemesis steps run: {', '.join(sorted(playable))}"
        )
    return lab_target(as_target)


def _where(
    scenario: Scenario, target: str, bootstrap: str | None, expect_as: str | None
) -> tuple[Target, LabTarget, str | None]:
    """The run's target, the lab target whose timeline and expectations it follows (an external
    cluster follows ``expect_as``'s, Kafka 3.9's by default), and the bootstrap servers when
    the user named them."""
    if target == "external":
        return "external", _check_external(scenario, bootstrap, expect_as), bootstrap
    if bootstrap:
        raise RunError("--bootstrap goes with --target external (the lab's targets are known)")
    if expect_as:
        raise RunError("--expect-as goes with --target external (a lab target is judged as itself)")
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
    only where a broker speaks it: Kafka 4, or a cluster the user names. A run without
    consumers has the classic protocol (what a matrix cell of a producer scenario names)."""
    if protocol is None or (spec is None and protocol == "classic"):
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


# ================================================================================ start
@dataclass(frozen=True)
class Workloads:
    """The clients a run starts (none started yet), and whether they are done."""

    producers: Workload
    readers: TopicReaders | None
    """One reader per isolation level, when the producers are transactional."""
    copiers: CopierWorkload | None
    """The copier stage, when the workload has one."""
    consumers: ConsumerWorkload | None
    done: WorkloadsDone


@dataclass(frozen=True)
class Run:
    """A started run: its context and record, and what plays it."""

    plan: RunPlan
    context: RunContext
    info: RunInfo
    workloads: Workloads
    nemesis: Nemesis
    timeline: TimelineRunner
    refbroker: RefbrokerControl | None
    rejected_before: dict[str, int]
    """The reference broker's rejected Produce answers by error when the run started."""
    broker_restore: dict[str, str | None]
    """The brokers' dynamic configs the run changed, as they were (put back by finish)."""
    front: FrontingProxy | None
    """The proxy in front of an external cluster, when the run has proxy faults."""


def bootstrap_of(target: LabTarget, config: LabConfig) -> str:
    return config.bootstrap(target)


def start(
    run_plan: RunPlan,
    *,
    runtime: ProcessFaults,
    config: LabConfig,
    runs_root: Path | None = None,
    replication: int | None = None,
    sink: str | None = None,
) -> Run:
    """The run made ready to play, phase by phase (nothing is sending yet); the fronting proxy
    is stopped if any phase after it fails."""
    ref, launch = _client_launch(run_plan)
    run_id, run_dir = _run_directory(run_plan, runs_root)
    front = _front(run_plan, run_dir)
    try:
        consumer_spec = _consumer_sink(run_plan, run_id, config, sink)
        context = _context(run_plan, run_id, run_dir, front=front, launch=launch, config=config)
        info = _run_json(run_plan, context, ref)
        _topics(run_plan, context, replication)
        refbroker, rejected = _refbroker_profile(run_plan, info, config)
        workloads = _workloads(run_plan, context, info, consumer_spec)
        nemesis, timeline = _nemesis_and_timeline(
            run_plan,
            context,
            workloads,
            runtime=runtime,
            config=config,
            front=front,
            refbroker=refbroker,
        )
        broker_restore = _set_broker_config(run_plan, context, info)
    except BaseException:
        if front is not None:
            front.stop()
        raise
    return Run(
        plan=run_plan,
        context=context,
        info=info,
        workloads=workloads,
        nemesis=nemesis,
        timeline=timeline,
        refbroker=refbroker,
        rejected_before=rejected,
        broker_restore=broker_restore,
        front=front,
    )


def _client_launch(run_plan: RunPlan) -> tuple[ClientRef, ClientLaunch | None]:
    """The client the run records (the workload's own librdkafka by default) and, for another
    client, how to launch it, prepared before anything is made so that a client that cannot be
    prepared (its jar or binary missing) leaves no run directory behind."""
    ref = default_client() if run_plan.client is None else parse_client(run_plan.client)
    try:
        return ref, None if run_plan.client is None else prepare(ref)
    except ClientError as error:
        raise RunError(str(error)) from None


def _run_directory(run_plan: RunPlan, runs_root: Path | None) -> tuple[str, RunDir]:
    """The run's id, named after its cell (scenario, mode, client, group protocol) so that a
    matrix's runs are told apart by name, and its run directory, created empty."""
    name = cell_name(
        run_plan.scenario.name, run_plan.mode, run_plan.client, run_plan.group_protocol
    )
    run_id = new_run_id(name, run_plan.target)
    return run_id, RunDir.for_run(run_id, runs_root).create()


def _front(run_plan: RunPlan, run_dir: RunDir) -> FrontingProxy | None:
    """The fronting proxy of an external run with proxy faults (None for any other run);
    RunError with its one line when the cluster cannot be fronted (the run directory, with
    nothing in it but that line, is removed)."""
    if not run_plan.fronted or run_plan.bootstrap is None:
        return None
    try:
        return FrontingProxy.start(
            run_plan.bootstrap,
            run_dir.path / "fronting.log",
            run_dir.path / "fronting-faults.jsonl",
            run_plan.seed,
        )
    except FrontingError as error:
        shutil.rmtree(run_dir.path, ignore_errors=True)
        raise RunError(str(error)) from None


def _consumer_sink(
    run_plan: RunPlan, run_id: str, config: LabConfig, sink: str | None
) -> ConsumerWorkloadSpec | None:
    """The consumer workload with the sink the caller asked for (``lab``: a database of the
    run's own, created now on the lab's PostgreSQL, so that a lab without one refuses the run
    before run.json is written); the plan's as it is without consumers or a sink."""
    spec = run_plan.consumers
    if spec is None or sink is None:
        return spec
    if sink == LAB_SINK:
        sink = lab_sink(config.postgres_root, config.port(BasePort.POSTGRES), run_id)
    return spec.model_copy(update={"sink": sink})


def _context(
    run_plan: RunPlan,
    run_id: str,
    run_dir: RunDir,
    *,
    front: FrontingProxy | None,
    launch: ClientLaunch | None,
    config: LabConfig,
) -> RunContext:
    """What every part of the run reads (workloads, readers, copiers, nemesis): its id and
    directory, the topic ``eos-<run id>``, the seed, the client, and the bootstrap its clients
    dial: the fronting proxy's when there is one, else the cluster the user named, else the
    lab target's."""
    return RunContext(
        run_id=run_id,
        run_dir=run_dir,
        target=run_plan.target,
        lab_target=run_plan.lab_target,
        bootstrap=(
            front.bootstrap
            if front is not None
            else run_plan.bootstrap or bootstrap_of(run_plan.lab_target, config)
        ),
        topic=run_topic(run_id),
        partitions=run_plan.scenario.topic.partitions,
        seed=run_plan.seed,
        client=launch,
    )


def _run_json(run_plan: RunPlan, context: RunContext, ref: ClientRef) -> RunInfo:
    """run.json as the run starts (written now: a run that fails from here on still says what
    it was): the scenario, target, topic, seed, client and broker versions, the expectations
    for this cell and the reference broker's profile on that target. Later phases add the
    transactions and broker configs; :func:`finish` the outcome."""
    scenario = run_plan.scenario
    info = RunInfo(
        run_id=context.run_id,
        scenario=scenario.name,
        target=run_plan.target,
        bootstrap=run_plan.bootstrap or context.bootstrap,
        topic=context.topic,
        partitions=context.partitions,
        seed=context.seed,
        started_ms=now_ms(),
        producer_config=scenario.producer_config,
        expected=scenario.expected.for_run(
            run_plan.lab_target,
            run_plan.mode,
            run_plan.client,
            transactional=run_plan.workload.transactions is not None,
            copied=run_plan.workload.copy_stage is not None,
            as_fixed=run_plan.as_fixed,
        ),
        client=run_plan.client,
        judged_as=run_plan.lab_target if run_plan.target == "external" else None,
        librdkafka=ref.version if ref.family == "librdkafka" else None,
        client_version=str(ref),
        broker_version=None
        if run_plan.target == "external"
        else broker_version(run_plan.lab_target, _rules(scenario)),
        broker_profile=(
            scenario.refbroker.settings()
            if scenario.refbroker and run_plan.lab_target == "refbroker"
            else {}
        ),
    )
    context.run_dir.write_info(info)
    return info


def _rules(scenario: Scenario) -> str | None:
    """The reference broker's rule set the scenario asks for (None: the broker's own)."""
    rules = scenario.refbroker.rules if scenario.refbroker else None
    return None if rules is None else str(rules)


def _topics(run_plan: RunPlan, context: RunContext, replication: int | None) -> None:
    """The run's topic and, with a copier stage, its output topic ``<topic>.copy``: created
    before any client starts, so that no client's auto-creation picks their partitions."""
    replicas = replication or REPLICATION[run_plan.target]
    create_topic(context.bootstrap, context.topic, context.partitions, replicas)
    if run_plan.workload.copy_stage is not None:
        create_topic(context.bootstrap, output_topic(context.topic), context.partitions, replicas)


def _refbroker_profile(
    run_plan: RunPlan, info: RunInfo, config: LabConfig
) -> tuple[RefbrokerControl | None, dict[str, int]]:
    """The reference broker's control (None when the lab runs none), with the scenario's profile
    (rules, retained batches) applied when run.json records one, and its rejected Produce
    answers so far, so that :func:`finish` counts only this run's. RunError when the scenario
    sets a reference broker that is not up."""
    refbroker = RefbrokerControl(config.refbroker_control_url) if config.with_refbroker else None
    scenario = run_plan.scenario
    if info.broker_profile:
        if refbroker is None:
            raise RunError(f"scenario {scenario.name} sets the reference broker, which is not up")
        for fault in scenario.refbroker.faults() if scenario.refbroker else []:
            refbroker.apply(fault)
    rejected = rejected_produces(refbroker) if run_plan.target == "refbroker" else {}
    return refbroker, rejected


def _workloads(
    run_plan: RunPlan,
    context: RunContext,
    info: RunInfo,
    consumer_spec: ConsumerWorkloadSpec | None,
) -> Workloads:
    """The producers with the scenario's producer config; with transactions, the readers, the
    transactions folder and run.json's transactions (the producers' transactional ids among
    them); the copiers and the consumers when the workload has them."""
    producers = Workload(run_plan.workload, context, run_plan.scenario.producer_config)
    transactions = run_plan.workload.transactions
    readers = None
    if transactions is not None:
        readers = TopicReaders(context)
        context.run_dir.create_transactions()
        info.transactions = TransactionsInfo(
            records_per_transaction=transactions.records_per_transaction,
            abort_ratio=transactions.abort_ratio,
            transaction_timeout_ms=transactions.transaction_timeout_ms,
            isolation=transactions.isolation,
            transactional_ids=producers.transactional_ids,
        )
        context.run_dir.write_info(info)
    copy_stage = run_plan.workload.copy_stage
    consumers = None if consumer_spec is None else ConsumerWorkload(consumer_spec, context)
    return Workloads(
        producers=producers,
        readers=readers,
        copiers=None if copy_stage is None else CopierWorkload(copy_stage, context),
        consumers=consumers,
        done=WorkloadsDone(producers, consumers),
    )


def _nemesis_and_timeline(
    run_plan: RunPlan,
    context: RunContext,
    workloads: Workloads,
    *,
    runtime: ProcessFaults,
    config: LabConfig,
    front: FrontingProxy | None,
    refbroker: RefbrokerControl | None,
) -> tuple[Nemesis, TimelineRunner]:
    """The nemesis, which reaches the lab's processes, the proxy (the fronting proxy's control
    for a fronted run), the reference broker and the workloads' clients; and the timeline that
    plays the plan's steps on it, its triggers counting the producers' acks and waiting on the
    workloads being done."""
    nemesis = Nemesis(
        context,
        runtime=runtime,
        proxy=ProxyControl(config.proxy_control_url if front is None else front.control_url),
        refbroker=refbroker,
        workload=workloads.producers,
        consumers=workloads.consumers,
    )
    producers = workloads.producers
    timeline = TimelineRunner(
        run_plan.steps, nemesis, acked=lambda: producers.acked, workload_done=workloads.done
    )
    return nemesis, timeline


def _set_broker_config(
    run_plan: RunPlan, context: RunContext, info: RunInfo
) -> dict[str, str | None]:
    """The scenario's dynamic broker configs for this target, set on every broker (recorded in
    run.json); what they were before, for :func:`finish` to put back. The last phase of
    :func:`start`, so that a run that fails to start leaves the brokers as they were. RunError
    for a config the brokers do not know or read at start only: nothing is set then."""
    wanted = run_plan.scenario.broker_config.get(run_plan.lab_target, {})
    if not wanted or run_plan.target == "external":
        return {}
    configs = {
        name: str(v).lower() if isinstance(v, bool) else str(v) for name, v in wanted.items()
    }
    try:
        previous = set_broker_configs(context.bootstrap, configs)
    except (BrokerConfigError, KafkaException) as error:
        raise RunError(f"{run_plan.scenario.name} on {run_plan.target}: {error}") from None
    info.broker_config = configs
    context.run_dir.write_info(info)
    return previous


def rejected_produces(refbroker: RefbrokerControl | None) -> dict[str, int]:
    """The reference broker's count of Produce answers per error so far."""
    if refbroker is None:
        return {}
    return dict(refbroker.counters().get("produce", {}).get("rejected", {}))


# ================================================================================ play
def play(run: Run, *, show_progress: bool | None = None) -> list[str]:
    """Workloads ∥ timeline until done or the scenario's time bound; returns what went wrong
    while playing (the workloads and timeline are still to be stopped: :func:`finish`)."""
    problems: list[str] = []
    primed = run.timeline.prime()  # `at: 0` faults meet the clients' first requests
    if run.workloads.readers is not None:
        run.workloads.readers.start()
    if run.workloads.copiers is not None:
        run.workloads.copiers.start()
    if run.workloads.consumers is not None:
        run.workloads.consumers.start()
        if not run.workloads.consumers.wait_settled():
            problems.append(
                f"the consumer group did not form within {SETTLE_TIMEOUT_S:g} s: "
                "the records were produced to an incomplete group"
            )
    # The fault clock starts once the producers flow (a warm start), unless a fault is in
    # place already, which the first records are to meet.
    run.workloads.producers.start(warm=not primed)
    run.timeline.start()
    timeout_s = run.plan.scenario.timeout_s
    _wait(
        lambda: run.workloads.done() and not run.timeline.is_alive(),
        timeout_s,
        run.workloads.producers,
        run.plan.workload.records,
        show_progress,
    )
    if not run.workloads.done() or run.timeline.is_alive():
        problems.append(f"the run did not finish within timeout_s={timeout_s}")
    return problems


# ================================================================================ finish
def finish(run: Run, problems: list[str]) -> RunResult:
    """Stop the timeline and the workloads, heal, set the reference broker back, judge every
    step, and write run.json; the lab is healed and the fronting proxy stopped whatever
    happened before."""
    try:
        return _finish(run, problems)
    finally:
        if run.front is not None:
            run.front.stop()


def _finish(run: Run, problems: list[str]) -> RunResult:
    problems = list(problems)
    try:
        run.timeline.stop()
        run.timeline.join(timeout=60)
        run.workloads.producers.stop()
    finally:
        run.nemesis.heal()
        problems += run.nemesis.errors
        if run.info.broker_profile and run.refbroker is not None:
            run.refbroker.clear()
        if run.broker_restore:
            try:
                restore_broker_configs(run.context.bootstrap, run.broker_restore)
            except KafkaException as error:
                problems.append(f"the brokers' configs could not be put back: {error}")
        if run.workloads.consumers is not None:
            run.workloads.consumers.stop()
            problems += run.workloads.consumers.failures()
    if run.timeline.error is not None:
        problems.append(f"nemesis timeline: {run.timeline.error}")
    problems += run.workloads.producers.failures()
    transactions = run.info.transactions
    if run.workloads.readers is not None and transactions is not None:
        stable_s = transactions.transaction_timeout_ms / 1000 + STABLE_MARGIN_S
        reads, held = run.workloads.readers.finish(stable_s)
        transactions = transactions.model_copy(update={"reads": reads, "held_at_end": held})
        problems += [
            f"the {read.isolation} reader did not read the topic to its end"
            for read in reads
            if not read.complete
        ]
    copier = None
    if run.workloads.copiers is not None:
        if not run.workloads.copiers.finish():
            problems.append("a copier did not copy the topic to its end and exit when asked")
        problems += run.workloads.copiers.failures()
        copier = run.workloads.copiers.info()
    broker_errors = {}
    if run.plan.target == "refbroker":
        now = rejected_produces(run.refbroker)
        broker_errors = {
            name: count - run.rejected_before.get(name, 0)
            for name, count in now.items()
            if count > run.rejected_before.get(name, 0)
        }
    info = run.info.model_copy(
        update={
            "ended_ms": now_ms(),
            "sessions": run.workloads.producers.sessions,
            "consumption": None
            if run.workloads.consumers is None
            else run.workloads.consumers.info(),
            "transactions": transactions,
            "copier": copier,
            "faults": run.nemesis.effects(run.plan.steps),
            "broker_errors": broker_errors,
            "fronting": None if run.front is None else _fronting(run.front),
            "problems": problems,
        }
    )
    run.context.run_dir.write_info(info)
    return RunResult(run.context.run_dir, info, problems)


def _fronting(front: FrontingProxy) -> dict[str, object]:
    """The fronting proxy's bootstrap and counters, for run.json."""
    counters = ProxyControl(front.control_url).counters()
    return {"bootstrap": front.bootstrap, "routes": counters["routes"], **counters["fronting"]}


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
    client: str | None = None,
    group_protocol: GroupProtocol | None = None,
    expect_as: str | None = None,
    as_fixed: bool = False,
) -> RunResult:
    """Run `scenario` on `target` (plan, start, play, finish); for target "external",
    `bootstrap` names the cluster. With a handler ``mode`` the run has a consumer workload in
    that mode (the scenario's own, else the default one); ``sink`` is its database: a
    PostgreSQL URL, ``lab`` for a database of its own on the lab's PostgreSQL, else SQLite in
    the run directory; ``client`` the client every role runs (``java:3.9.2``; default: the
    workload's own librdkafka); ``group_protocol`` the consumers' group protocol (default: the workload's,
    classic); ``expect_as`` the lab target an external cluster is judged as (default kafka)."""
    run_plan = plan(
        scenario,
        target,
        seed=seed,
        records=records,
        mode=mode,
        client=client,
        group_protocol=group_protocol,
        bootstrap=bootstrap,
        expect_as=expect_as,
        as_fixed=as_fixed,
    )
    run = start(
        run_plan,
        runtime=runtime,
        config=config,
        runs_root=runs_root,
        replication=replication,
        sink=sink,
    )
    problems: list[str] = []
    try:
        problems = play(run, show_progress=show_progress)
    finally:
        result = finish(run, problems)
    return result


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
