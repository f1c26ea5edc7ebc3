"""What every step is: a trigger (``at`` or ``after_acked``, a seeded ``jitter``), the targets it
applies to, for ending steps an end (``duration`` or ``until``), and how it plays on the lab
through a :class:`StepContext` (the nemesis)."""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from eoslab.rundir import LabTarget
from eoslab.runtime.topology import KAFKA4_SERVICES, KAFKA_SERVICES, REFBROKER_SERVICE

if TYPE_CHECKING:
    from eoslab.nemesis.timeline import ResolvedStep
    from eoslab.proxy.control_client import ProxyControl
    from eoslab.refbroker.control_client import RefbrokerControl
    from eoslab.rundir import RunDir
    from eoslab.runtime.lab import ProcessFaults
    from eoslab.workload.consumer_workload import ConsumerWorkload
    from eoslab.workload.supervisor import Workload

LEADER = "leader"
COORDINATOR = "coordinator"
CONTROLLER = "controller"
RANDOM_BROKER = "random-broker"
SERVICE_TARGETS = (
    LEADER,
    COORDINATOR,
    CONTROLLER,
    RANDOM_BROKER,
    *KAFKA_SERVICES,
    *KAFKA4_SERVICES,
    REFBROKER_SERVICE,
)
"""What a step may name as its target: a service, the current partition leader, the broker
coordinating the run's consumer group, the active controller (Kafka 4: the metadata quorum's
leader; Kafka 3.9: the broker ZooKeeper elected), or a seeded pick among the target's brokers."""


@dataclass(frozen=True)
class ScenarioShape:
    """What a step may check a scenario against: its targets and its workloads' sizes."""

    targets: tuple[LabTarget, ...]
    producers: int
    partitions: int
    consumers: int
    """Consumer processes of the consumer workload; 0 when the scenario has none."""


class StepContext(Protocol):
    """What the nemesis offers a step while it plays."""

    target: LabTarget
    runtime: ProcessFaults
    run_dir: RunDir
    bootstrap: str
    topic: str

    def service(self, step: ResolvedStep) -> str:
        """The service the step acts on (the leader looked up now, if it says "leader")."""
        ...

    def log(self, kind: str, target: str | None, phase: str, **detail: Any) -> None:
        """One line of the run's faults.jsonl."""
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

    @abc.abstractmethod
    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        """Break something (and log it)."""

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        """Undo it after the step's duration (ending steps only)."""
        ctx.repair(step)


class EndingStep(Step):
    """A step whose fault lasts: until ``duration`` seconds have passed, or offset ``until``;
    without either it lasts until the run heals."""

    duration: float | None = Field(None, gt=0, description="seconds until the fault ends")
    until: float | None = Field(None, gt=0, description="offset (seconds) where the fault ends")

    @model_validator(mode="after")
    def _coherent_end(self) -> Self:
        if self.duration is not None and self.until is not None:
            raise ValueError("until: give either duration or until, not both")
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
    """A step that acts on one service of the lab (a broker, the reference broker)."""

    target: str = LEADER

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


def start_phase(step: ResolvedStep) -> str:
    """``start`` for a fault that will end, ``instant`` for one that does not."""
    return "start" if step.duration_s is not None else "instant"
