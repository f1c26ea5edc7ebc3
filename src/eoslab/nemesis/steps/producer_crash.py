"""kill -9 a producer process; a new session (a new PID) starts after `duration`, at once if
unset."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from eoslab.nemesis.steps.base import EndingStep, ScenarioShape, StepContext, start_phase

if TYPE_CHECKING:
    from eoslab.nemesis.timeline import ResolvedStep


class ProducerCrashStep(EndingStep):
    kind: Literal["producer-crash"]
    producer: int = Field(0, ge=0)

    def misfit(self, scenario: ScenarioShape) -> str | None:
        if self.producer >= scenario.producers:
            return (
                f"producer: {self.producer}, but the workload has {scenario.producers} producer(s)"
            )
        return None

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        crashed = ctx.workload().crash(self.producer)
        who = f"producer-{self.producer}"
        phase = start_phase(step)
        ctx.log("producer-crash", who, phase, step=step.index, session_id=crashed.session_id)
        if phase == "instant":
            self._restart(ctx, step, phase)

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        self._restart(ctx, step, "end")

    def _restart(self, ctx: StepContext, step: ResolvedStep, phase: str) -> None:
        session = ctx.workload().restart(self.producer)
        ctx.log(
            "producer-crash",
            f"producer-{self.producer}",
            phase,
            step=step.index,
            restarted=session.session_id,
        )
