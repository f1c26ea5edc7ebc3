"""What every step is: a trigger (``at`` or ``after_acked``, a seeded ``jitter``), the targets it
applies to, for ending steps an end (``duration`` or ``until``), how it plays on the lab through
a :class:`StepContext` (the nemesis), and what it must show: every step judges, from what it
observed, whether it took effect (:meth:`StepContext.judge`); a step that does not is the
run's ruin (its verdict is invalid)."""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from eoslab.fault_events import FaultPhase
from eoslab.rundir import REPLICATION, LabTarget
from eoslab.runtime.lab import ProcessState
from eoslab.runtime.topology import KAFKA4_SERVICES, KAFKA_SERVICES, REFBROKER_SERVICE

if TYPE_CHECKING:
    from eoslab.proxy.control_client import ProxyControl
    from eoslab.refbroker.control_client import RefbrokerControl
    from eoslab.run_context import RunContext
    from eoslab.runtime.lab import ProcessFaults
    from eoslab.runtime.netfaults import LabNetwork
    from eoslab.workload.consumer.workload import ConsumerWorkload
    from eoslab.workload.supervisor import Workload

LEADER = "leader"
FOLLOWERS = "followers"
COORDINATOR = "coordinator"
TXN_COORDINATOR = "txn-coordinator"
CONTROLLER = "controller"
RANDOM_BROKER = "random-broker"
SERVICE_TARGETS = (
    LEADER,
    FOLLOWERS,
    COORDINATOR,
    TXN_COORDINATOR,
    CONTROLLER,
    RANDOM_BROKER,
    *KAFKA_SERVICES,
    *KAFKA4_SERVICES,
    REFBROKER_SERVICE,
)
"""What a step may name as its target: a service, the current partition leader, its followers
(every other replica: a leader cut off from them), the broker coordinating the run's consumer
group, the broker coordinating producer 0's transactional id (FindCoordinator, key type 1), the
active controller (Kafka 4: the metadata quorum's leader; Kafka 3.9: the broker
ZooKeeper elected), or a seeded pick among the target's brokers."""


@dataclass(frozen=True)
class ScenarioShape:
    """What a step may check a scenario (or one run of it) against: its targets, its
    workloads' sizes and pace, and its time bound."""

    targets: tuple[LabTarget, ...]
    producers: int
    partitions: int
    consumers: int
    """Consumer processes of the consumer workload; 0 when the scenario has none."""
    records: int | None = None
    """Records the producers send in all; None: bounded by time only."""
    sending_s: float | None = None
    """How long the producers send at their rate; None: unknown (full speed)."""
    timeout_s: float | None = None
    transaction_timeout_s: float | None = None
    """The transactional producers' transaction.timeout.ms, in seconds; None: not transactional."""

    @property
    def transactional(self) -> bool:
        """Whether the producers are transactional (a transaction coordinator to act on)."""
        return self.transaction_timeout_s is not None


class StepContext(Protocol):
    """What the nemesis offers a step while it plays."""

    context: RunContext
    runtime: ProcessFaults

    def service(self, step: ResolvedStep) -> str:
        """The service the step acts on (the leader looked up now, if it says "leader")."""
        ...

    def services(self, step: ResolvedStep) -> list[str]:
        """The services the step acts on: its service, or the partition's followers."""
        ...

    def leader_of(self, partition: int) -> str:
        """The service leading a partition of the run's topic now."""
        ...

    def resolve_target(self, name: str, partition: int = 0) -> list[str]:
        """The services a target names now (``leader``, ``followers``, ``controller``, a
        coordinator, a service)."""
        ...

    def log(
        self,
        step: ResolvedStep,
        phase: FaultPhase | str,
        *,
        kind: str | None = None,
        target: str | None = None,
        **detail: Any,
    ) -> None:
        """One line of the run's faults.jsonl (the step's kind and target unless told)."""
        ...

    def judge(self, step: ResolvedStep, took_effect: bool, evidence: str, **observed: Any) -> None:
        """What the step saw, and whether that shows it took effect (one line of evidence);
        a later judgement replaces the verdict and adds to what was observed."""
        ...

    def observe(self, step: ResolvedStep, **observed: Any) -> None:
        """More of what the step saw, the judgement unchanged."""
        ...

    def claim(self, step: ResolvedStep, evidence: str) -> int | None:
        """Claim an observation (a rebalance, say) as the step's own evidence: None, or the
        index of the step that claimed it first (then it is that step's, not this one's)."""
        ...

    def broke(
        self, step: ResolvedStep, repair: str, undo: Callable[[], object], **memo: Any
    ) -> None:
        """Remember what the step broke and how to undo it (at its end, else when the run
        heals), with whatever the step wants to find again at its end (``memo``)."""
        ...

    def memo(self, step: ResolvedStep) -> dict[str, Any]:
        """What the step remembered when it broke something."""
        ...

    def repair(self, step: ResolvedStep) -> None:
        """Undo what the step broke, now (its end)."""
        ...

    def end_faults(self, kinds: Collection[str]) -> list[ResolvedStep]:
        """End every step of these kinds whose fault is still in place, as its own end would;
        the steps ended."""
        ...

    def network(self) -> LabNetwork:
        """The lab's network, for cutting links between its nodes (refused, with the reason,
        where it cannot be)."""
        ...

    def proxy(self) -> ProxyControl: ...
    def refbroker(self) -> RefbrokerControl: ...
    def workload(self) -> Workload: ...
    def consumers(self) -> ConsumerWorkload: ...


class Step(BaseModel, abc.ABC):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    """The step's name in scenario files; every concrete step narrows it to a literal."""
    at: float | None = Field(None, ge=0, description="seconds after the workload starts")
    after_acked: int | None = Field(None, ge=1, description="once this many records are acked")
    jitter: float = Field(0.0, ge=0, description="a seeded extra delay in [0, jitter) seconds")
    on: tuple[LabTarget, ...] | None = Field(
        None, description="only on these targets (default: every target of the scenario)"
    )

    @model_validator(mode="after")
    def _one_trigger(self) -> Self:
        if self.at is not None and self.after_acked is not None:
            raise ValueError("at: give either at or after_acked, not both")
        if self.at is None and self.after_acked is None:
            raise ValueError("at: give at (seconds) or after_acked (records)")
        return self

    @property
    def length_s(self) -> float | None:
        """How long the fault lasts; None: it has no end of its own."""
        return None

    @property
    def service_target(self) -> str | None:
        """The service named in the scenario file (resolved per run), if the step has one."""
        return None

    def misfit(self, scenario: ScenarioShape) -> str | None:
        """Why the step cannot be part of a scenario of this shape, or None."""
        return None

    def unreachable(self, scenario: ScenarioShape) -> str | None:
        """Why the step's trigger can never come in a run of this shape (it would be skipped
        and the run invalid), or None: a record count the run never acknowledges, a moment
        past the run's time bound or, for a run without consumers (it ends with its
        producers), past the time its producers send."""
        records = scenario.records
        if self.after_acked is not None and records is not None and self.after_acked > records:
            return (
                f"after_acked: {self.after_acked} is more than the {records} records the run "
                "sends: the step could never fire"
            )
        if self.at is None:
            return None
        if scenario.timeout_s is not None and self.at + self.jitter >= scenario.timeout_s:
            return f"at: {self.at} s is past the run's timeout_s ({scenario.timeout_s:g} s)"
        sending_s = scenario.sending_s
        if not scenario.consumers and sending_s is not None and self.at + self.jitter >= sending_s:
            return (
                f"at: {self.at} s (+ jitter {self.jitter:g} s) is past the {sending_s:g} s the "
                "producers send: the step could never fire"
            )
        return None

    @abc.abstractmethod
    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        """Break something (and log it)."""

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        """Undo it after the step's duration (ending steps only)."""
        ctx.repair(step)


class EndingStep(Step):
    """A step whose fault lasts: until ``duration`` seconds have passed, or offset ``until``;
    without either it lasts until the run heals (unless it :attr:`needs_end`)."""

    duration: float | None = Field(None, gt=0, description="seconds until the fault ends")
    until: float | None = Field(None, gt=0, description="offset (seconds) where the fault ends")
    needs_end: ClassVar[str | None] = None
    """What the step is called in the refusal of a file that gives it no end (a pause must
    end); None: it may last until the run heals."""

    @model_validator(mode="after")
    def _coherent_end(self) -> Self:
        if self.duration is not None and self.until is not None:
            raise ValueError("until: give either duration or until, not both")
        if self.needs_end is not None and self.duration is None and self.until is None:
            raise ValueError(f"duration: {self.needs_end} needs a duration (or until)")
        if self.until is not None:
            if self.at is None:
                raise ValueError("until: needs an `at` start (use duration with after_acked)")
            if self.until <= self.at:
                raise ValueError(
                    f"until: the fault ends ({self.until}) before it starts ({self.at})"
                )
        return self

    @property
    def length_s(self) -> float | None:
        if self.until is not None and self.at is not None:
            return self.until - self.at
        return self.duration


class PartitionStep(Step):
    """A step about one partition of the run's topic (its leader, or a probe played on it)."""

    partition: int = Field(0, ge=0, description="the partition: whose leader, what to probe")

    def misfit(self, scenario: ScenarioShape) -> str | None:
        if self.partition >= scenario.partitions:
            return (
                f"partition: {self.partition}, but the topic has {scenario.partitions} partition(s)"
            )
        return None


class ServiceStep(PartitionStep):
    """A step that acts on one service of the lab (a broker, the reference broker), or, for
    the kinds that take several (:attr:`takes_followers`), on a partition's followers."""

    target: str = LEADER
    takes_followers: ClassVar[bool] = False

    def misfit(self, scenario: ScenarioShape) -> str | None:
        if self.target == FOLLOWERS:
            if not self.takes_followers:
                return f"target: {self.kind} acts on one service, not on followers"
            if "refbroker" in (self.on or scenario.targets):
                return "target: the reference broker has no followers (on: [kafka])"
        if self.target == TXN_COORDINATOR and not scenario.transactional:
            return "target: txn-coordinator needs transactional producers (workload.transactions)"
        return super().misfit(scenario)

    @field_validator("target")
    @classmethod
    def _known_service(cls, target: str) -> str:
        if target not in SERVICE_TARGETS:
            raise ValueError(
                f"unknown target {target!r}; one of {', '.join(map(repr, SERVICE_TARGETS))}"
            )
        return target

    @property
    def service_target(self) -> str | None:
        return self.target


class ProducerStep(EndingStep):
    """A step that acts on one producer process of the workload."""

    producer: int = Field(0, ge=0, description="the producer's index in the workload")

    def misfit(self, scenario: ScenarioShape) -> str | None:
        if self.producer >= scenario.producers:
            return (
                f"producer: {self.producer}, but the workload has {scenario.producers} producer(s)"
            )
        return None

    @property
    def who(self) -> str:
        return f"producer-{self.producer}"


class ConsumerStep(EndingStep):
    """A step that acts on one consumer process of the consumer workload."""

    consumer: int = Field(0, ge=0, description="the consumer's index in the group")

    def misfit(self, scenario: ScenarioShape) -> str | None:
        if self.consumer >= scenario.consumers:
            return (
                f"consumer: {self.consumer}, but the consumer workload has "
                f"{scenario.consumers} consumer(s)"
            )
        return None

    @property
    def who(self) -> str:
        return f"consumer-{self.consumer}"


class RestartingStep(EndingStep):
    """A step that kills a process of a workload: a new session of it starts at the step's end,
    at once without a duration."""

    @property
    @abc.abstractmethod
    def who(self) -> str:
        """The process, as the faults log names it."""

    @abc.abstractmethod
    def _new_session(self, ctx: StepContext) -> str:
        """Start a new session of the killed process; its session id."""

    def _killed(self, ctx: StepContext, step: ResolvedStep, **detail: Any) -> None:
        """Log the kill (``detail``: what it observed); restart at once without a duration."""
        phase = start_phase(step)
        ctx.log(step, phase, target=self.who, **detail)
        if phase == FaultPhase.INSTANT:
            self._restart(ctx, step, phase)

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        self._restart(ctx, step, FaultPhase.END)

    def _restart(self, ctx: StepContext, step: ResolvedStep, phase: FaultPhase) -> None:
        session_id = self._new_session(ctx)
        ctx.observe(step, restarted=session_id)
        ctx.log(step, phase, target=self.who, restarted=session_id)


class ResolvedStep(BaseModel):
    """One step for one run: trigger and end fixed, random choices made."""

    model_config = ConfigDict(frozen=True)

    index: int
    kind: str
    at_s: float | None
    after_acked: int | None
    duration_s: float | None
    target: str | None
    """A service name, "leader", "followers", "coordinator", "txn-coordinator" or "controller"
    (looked up at
    start), "*" (every proxy route) or None."""
    step: Step


def leader_now(ctx: StepContext, partition: int) -> str:
    """Who leads ``partition`` now, for a step's evidence ("unknown: why" when nobody can say:
    no leader is an observation too)."""
    try:
        return ctx.leader_of(partition)
    except Exception as error:
        return f"unknown: {error}"


def judge_leadership(
    ctx: StepContext, step: ResolvedStep, partition: int, memo: dict[str, Any], *seen: str
) -> None:
    """Judge a kill or pause of ``partition``'s leader by whether leadership moved: ``seen``
    are the leaders looked up after the fault (at its end, after its repair), ``memo`` the
    start's judgement (``took_effect``, ``evidence``) and ``leader_before``. A one-node target
    (the reference broker), whose leadership has nowhere to go, is judged by the fault alone."""
    before = memo["leader_before"]
    if REPLICATION[ctx.context.lab_target] == 1:
        ctx.judge(
            step,
            memo["took_effect"],
            f"{memo['evidence']}; one node: leadership has nowhere to move",
        )
        return
    moved = next((s for s in seen if s != before and not s.startswith("unknown")), None)
    where = f"partition {partition}"
    ctx.judge(
        step,
        memo["took_effect"] and moved is not None,
        f"{memo['evidence']}; leadership of {where} moved from {before} to {moved}"
        if moved is not None
        else f"{memo['evidence']}; but {before} still led {where} after the fault "
        f"(seen: {', '.join(seen)}): leadership never moved",
    )


def restarted(
    ctx: StepContext, services: list[str], interval_s: float = 0.0
) -> tuple[bool, str, dict[str, Any]]:
    """Restart each service in turn (``interval_s`` between two); whether every one runs as a
    new process afterwards, the evidence, and the pids before and after."""
    pids: dict[str, list[int | None]] = {}
    for index, service in enumerate(services):
        if index and interval_s:
            time.sleep(interval_s)
        before = ctx.runtime.observe(service).pid
        ctx.runtime.restart(service)
        after = ctx.runtime.observe(service)
        pids[service] = [before, after.pid if after.state is ProcessState.RUNNING else None]
    fresh = [s for s, (before, after) in pids.items() if after is not None and after != before]
    if len(fresh) == len(services):
        return True, f"restarted {', '.join(services)} (new pids)", {"pids": pids}
    stale = ", ".join(s for s in services if s not in fresh)
    return False, f"{stale} did not come back as a new process", {"pids": pids}


def start_phase(step: ResolvedStep) -> FaultPhase:
    """``start`` for a fault that will end at its duration, ``instant`` for one that does not
    (what it broke, if anything, is undone when the run heals)."""
    return FaultPhase.START if step.duration_s is not None else FaultPhase.INSTANT


def on_each(
    services: list[str], act: Callable[[str], object], undo: Callable[[str], object]
) -> None:
    """``act`` on every service in turn; where one fails, ``undo`` it on the ones before (last
    first) and raise: a step whose start fails halfway leaves nothing broken, for its undo is
    registered only once its start is whole (`make conformance`, 2026-12-07: a pause of two
    followers failed on the second, and the first stayed frozen past the run)."""
    done: list[str] = []
    try:
        for service in services:
            act(service)
            done.append(service)
    except Exception:
        for service in reversed(done):
            undo(service)
        raise
