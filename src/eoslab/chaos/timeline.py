"""Fault timelines: what the nemesis does, when, for how long, and the thread that does it.

A scenario lists steps. Each starts at an offset (``at``: seconds from the workload's start,
or ``after_acked``: once that many records are acknowledged), optionally shifted by a seeded
``jitter``, and faults that end have a ``duration`` (or an ``until`` offset). Targets are a
service (``kafka-2``, ``refbroker``), ``random-broker`` (a seeded pick) or ``leader`` (the
current leader of ``partition``, looked up when the step starts).

:func:`resolve` turns the steps into concrete :class:`ResolvedStep` s for one target and
seed, with every random choice made: the same scenario and seed give the same timeline.
:class:`TimelineRunner` then plays them beside the workload.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal, Protocol, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from eoslab.chaos.fault_spec import FAULT_SPEC_ADAPTER, FaultSpec
from eoslab.refbroker.faults import FAULT_ADAPTER as REFBROKER_FAULT_ADAPTER
from eoslab.refbroker.faults import Fault as RefbrokerFault

RunTarget = Literal["kafka", "refbroker"]
KAFKA_BROKERS = ("kafka-1", "kafka-2", "kafka-3")
ServiceTarget = Literal["leader", "random-broker", "kafka-1", "kafka-2", "kafka-3", "refbroker"]
ProbeName = Literal["inflight-6", "seq-jump"]


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    at: float | None = Field(None, ge=0, description="seconds after the workload starts")
    after_acked: int | None = Field(None, ge=1, description="once this many records are acked")
    jitter: float = Field(0.0, ge=0, description="a seeded extra delay in [0, jitter) seconds")
    on: tuple[RunTarget, ...] | None = Field(
        None, description="only on these targets (default: every target of the scenario)"
    )

    @model_validator(mode="after")
    def _one_trigger(self) -> Self:
        if self.at is not None and self.after_acked is not None:
            raise ValueError("at: give either at or after_acked, not both")
        if self.at is None and self.after_acked is None:
            raise ValueError("at: give at (seconds) or after_acked (records)")
        return self


class _EndingStep(_Step):
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


class KillStep(_EndingStep):
    """kill -9 a broker; restarted after `duration`, else when the run heals."""

    kind: Literal["kill"]
    target: ServiceTarget = "leader"
    partition: int = Field(0, ge=0)


class PauseStep(_EndingStep):
    """SIGSTOP a broker for `duration` (required), then SIGCONT."""

    kind: Literal["pause"]
    target: ServiceTarget = "leader"
    partition: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _has_end(self) -> Self:
        if self.length_s is None:
            raise ValueError("duration: a pause needs a duration (or until)")
        return self


class RestartStep(_Step):
    """Stop a broker cleanly and start it again."""

    kind: Literal["restart"]
    target: ServiceTarget = "leader"
    partition: int = Field(0, ge=0)


class RollingRestartStep(_Step):
    """Restart every broker of the target, one after the other."""

    kind: Literal["rolling-restart"]
    interval: float = Field(1.0, ge=0, description="seconds between two restarts")


class ProxyStep(_EndingStep):
    """A chaos-proxy fault on a broker's route; removed after `duration`, else at heal."""

    kind: Literal["proxy"]
    target: ServiceTarget | Literal["*"] = "leader"
    partition: int = Field(0, ge=0)
    fault: dict[str, Any]

    @field_validator("fault")
    @classmethod
    def _valid_fault(cls, fault: dict[str, Any]) -> dict[str, Any]:
        if "route" in fault:
            raise ValueError("route: set by the step's target, not in the fault")
        FAULT_SPEC_ADAPTER.validate_python(fault)
        return fault

    def spec(self, route: str) -> FaultSpec:
        return FAULT_SPEC_ADAPTER.validate_python({**self.fault, "route": route})


class RefbrokerStep(_EndingStep):
    """A state or request fault on the reference broker (its control API); cleared after
    `duration`, else at heal."""

    kind: Literal["refbroker"]
    fault: dict[str, Any]

    @field_validator("fault")
    @classmethod
    def _valid_fault(cls, fault: dict[str, Any]) -> dict[str, Any]:
        REFBROKER_FAULT_ADAPTER.validate_python(fault)
        return fault

    @property
    def parsed(self) -> RefbrokerFault:
        return REFBROKER_FAULT_ADAPTER.validate_python(self.fault)


class ProducerCrashStep(_EndingStep):
    """kill -9 a producer process; a new session starts after `duration` (at once if unset)."""

    kind: Literal["producer-crash"]
    producer: int = Field(0, ge=0)


class ProbeStep(_Step):
    """A crafted Produce exchange from the protocol-level client (eoslab.probe)."""

    kind: Literal["probe"]
    probe: ProbeName
    partition: int = Field(0, ge=0)


Step = Annotated[
    KillStep
    | PauseStep
    | RestartStep
    | RollingRestartStep
    | ProxyStep
    | RefbrokerStep
    | ProducerCrashStep
    | ProbeStep,
    Field(discriminator="kind"),
]
STEP_KINDS = (
    "kill",
    "pause",
    "restart",
    "rolling-restart",
    "proxy",
    "refbroker",
    "producer-crash",
    "probe",
)


class ResolvedStep(BaseModel):
    """One step for one run: trigger and end fixed, random choices made."""

    model_config = ConfigDict(frozen=True)

    index: int
    kind: str
    at_s: float | None
    after_acked: int | None
    duration_s: float | None
    target: str | None
    """A service name, "leader" (looked up at start), "*" (every proxy route) or None."""
    step: Step


def brokers_of(target: RunTarget) -> tuple[str, ...]:
    return KAFKA_BROKERS if target == "kafka" else ("refbroker",)


def resolve(steps: list[Step], target: RunTarget, seed: int) -> list[ResolvedStep]:
    """The steps that apply to ``target``, with jitter and random targets drawn from ``seed``."""
    rng = random.Random(f"timeline:{seed}:{target}")
    resolved = []
    for index, step in enumerate(steps):
        shift = rng.uniform(0.0, step.jitter) if step.jitter else 0.0
        pick = rng.choice(brokers_of(target))
        if step.on is not None and target not in step.on:
            continue
        service: str | None = getattr(step, "target", None)
        if service == "random-broker":
            service = pick
        elif service == "leader" and target == "refbroker":
            service = "refbroker"
        duration = step.length_s if isinstance(step, _EndingStep) else None
        resolved.append(
            ResolvedStep(
                index=index,
                kind=step.kind,
                at_s=None if step.at is None else round(step.at + shift, 3),
                after_acked=step.after_acked,
                duration_s=duration,
                target=service,
                step=step,
            )
        )
    return resolved


class StepExecutor(Protocol):
    """What plays a step (the nemesis): start it, end it (steps with a duration only), or
    note that it never ran."""

    def start(self, step: ResolvedStep) -> None: ...
    def end(self, step: ResolvedStep) -> None: ...
    def skip(self, step: ResolvedStep, reason: str) -> None: ...


class TimelineRunner(threading.Thread):
    """Plays resolved steps beside the workload: starts each at its trigger, ends it after its
    duration. Steps whose trigger has not come when the workload is done are skipped."""

    def __init__(
        self,
        steps: list[ResolvedStep],
        executor: StepExecutor,
        *,
        acked: Callable[[], int],
        workload_done: Callable[[], bool],
        tick_s: float = 0.02,
    ) -> None:
        super().__init__(name="nemesis-timeline", daemon=True)
        self._pending = list(steps)
        self._active: list[tuple[float, ResolvedStep]] = []
        self._executor = executor
        self._acked = acked
        self._workload_done = workload_done
        self._tick_s = tick_s
        self._stop_requested = threading.Event()
        self.error: BaseException | None = None

    def stop(self) -> None:
        self._stop_requested.set()

    def run(self) -> None:
        try:
            self._play()
        except BaseException as error:  # reported by the run executor, which heals
            self.error = error

    def _play(self) -> None:
        started = time.monotonic()
        while (self._pending or self._active) and not self._stop_requested.is_set():
            for step in [s for s in self._pending if self._due(s, time.monotonic() - started)]:
                self._pending.remove(step)
                self._executor.start(step)
                if step.duration_s is not None:
                    self._active.append((time.monotonic() + step.duration_s, step))
            if self._pending and self._workload_done():
                for step in self._pending:
                    self._executor.skip(step, "the workload finished before its trigger")
                self._pending.clear()
            now = time.monotonic()
            for moment, step in [a for a in self._active if a[0] <= now]:
                self._active.remove((moment, step))
                self._executor.end(step)
            self._stop_requested.wait(self._tick_s)

    def _due(self, step: ResolvedStep, elapsed_s: float) -> bool:
        if step.at_s is not None:
            return elapsed_s >= step.at_s
        return step.after_acked is not None and self._acked() >= step.after_acked
