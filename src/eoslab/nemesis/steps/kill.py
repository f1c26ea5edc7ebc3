"""kill -9 a broker; it is restarted after `duration`, else when the run heals."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from eoslab.nemesis.steps.base import EndingStep, ServiceStep, StepContext, start_phase

if TYPE_CHECKING:
    from eoslab.nemesis.timeline import ResolvedStep


class KillStep(ServiceStep, EndingStep):
    kind: Literal["kill"]

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        service = ctx.service(step)
        ctx.runtime.kill(service)
        ctx.broke(step, f"restart {service}", lambda: ctx.runtime.restart(service))
        ctx.log("kill", service, start_phase(step), step=step.index, signal="SIGKILL")

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        ctx.repair(step)
        ctx.log("kill", ctx.service(step), "end", step=step.index, restarted=True)
