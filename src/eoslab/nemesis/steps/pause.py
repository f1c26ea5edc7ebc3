"""SIGSTOP a broker for `duration`, then SIGCONT: frozen with its sockets open (a GC pause, a
stalled VM), long enough to be taken for dead."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Self

from pydantic import model_validator

from eoslab.nemesis.steps.base import EndingStep, ServiceStep, StepContext

if TYPE_CHECKING:
    from eoslab.nemesis.timeline import ResolvedStep


class PauseStep(ServiceStep, EndingStep):
    kind: Literal["pause"]

    @model_validator(mode="after")
    def _has_end(self) -> Self:
        if self.length_s is None:
            raise ValueError("duration: a pause needs a duration (or until)")
        return self

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        service = ctx.service(step)
        ctx.runtime.pause(service)
        ctx.broke(step, f"resume {service}", lambda: ctx.runtime.resume(service))
        ctx.log("pause", service, "start", step=step.index, signal="SIGSTOP")

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        ctx.repair(step)
        ctx.log("pause", ctx.service(step), "end", step=step.index, signal="SIGCONT")
