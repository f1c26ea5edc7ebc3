"""Restart every broker of the target, one after the other.

Evidence: each broker runs as a new process (pid) afterwards."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from eoslab.fault_events import FaultPhase
from eoslab.nemesis.steps.base import ResolvedStep, Step, StepContext, restarted
from eoslab.runtime.topology import brokers_of


class RollingRestartStep(Step):
    kind: Literal["rolling-restart"]
    interval: float = Field(1.0, ge=0, description="seconds between two restarts")

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        services = list(brokers_of(ctx.context.lab_target))
        ok, evidence, observed = restarted(ctx, services, self.interval)
        ctx.judge(step, ok, evidence, **observed)
        ctx.log(step, FaultPhase.INSTANT, target=",".join(services), **observed)
