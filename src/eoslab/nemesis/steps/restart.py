"""Stop a broker cleanly and start it again with the same data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from eoslab.nemesis.steps.base import ServiceStep, StepContext

if TYPE_CHECKING:
    from eoslab.nemesis.timeline import ResolvedStep


class RestartStep(ServiceStep):
    kind: Literal["restart"]

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        service = ctx.service(step)
        ctx.log("restart", service, "start", step=step.index)
        ctx.runtime.restart(service)
        ctx.log("restart", service, "end", step=step.index)
