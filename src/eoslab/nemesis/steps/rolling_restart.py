"""Restart every broker of the target, one after the other."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from eoslab.nemesis.steps.base import Step, StepContext
from eoslab.runtime.topology import brokers_of

if TYPE_CHECKING:
    from eoslab.nemesis.timeline import ResolvedStep


class RollingRestartStep(Step):
    kind: Literal["rolling-restart"]
    interval: float = Field(1.0, ge=0, description="seconds between two restarts")

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        for service in brokers_of(ctx.target):
            ctx.log("restart", service, "start", step=step.index, rolling=True)
            ctx.runtime.restart(service)
            ctx.log("restart", service, "end", step=step.index, rolling=True)
            time.sleep(self.interval)
