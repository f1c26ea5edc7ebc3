"""Stop a broker cleanly and start it again with the same data.

Evidence: a new process (pid) runs afterwards."""

from __future__ import annotations

from typing import Literal

from eoslab.fault_events import FaultPhase
from eoslab.nemesis.steps.base import ResolvedStep, ServiceStep, StepContext, restarted


class RestartStep(ServiceStep):
    kind: Literal["restart"]

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        service = ctx.service(step)
        ok, evidence, observed = restarted(ctx, [service])
        ctx.judge(step, ok, evidence, **observed)
        ctx.log(step, FaultPhase.INSTANT, **observed)
