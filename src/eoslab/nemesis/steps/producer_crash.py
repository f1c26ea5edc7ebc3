"""kill -9 a producer process; a new session (a new PID) starts after `duration`, at once if
unset.

Evidence: the session that was running was killed, and how many of its records were in
flight (settled as indeterminate)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from eoslab.fault_events import FaultPhase
from eoslab.nemesis.steps.base import (
    EndingStep,
    ResolvedStep,
    ScenarioShape,
    StepContext,
    start_phase,
)


class ProducerCrashStep(EndingStep):
    kind: Literal["producer-crash"]
    producer: int = Field(0, ge=0)

    def misfit(self, scenario: ScenarioShape) -> str | None:
        if self.producer >= scenario.producers:
            return (
                f"producer: {self.producer}, but the workload has {scenario.producers} producer(s)"
            )
        return None

    @property
    def who(self) -> str:
        return f"producer-{self.producer}"

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        crashed, in_flight = ctx.workload().crash(self.producer)
        ctx.judge(
            step,
            True,
            f"session {crashed.session_id[:8]} killed (SIGKILL) with {in_flight} record(s) in flight",
            session_id=crashed.session_id,
            in_flight=in_flight,
        )
        phase = start_phase(step)
        ctx.log(
            step,
            phase,
            target=self.who,
            session_id=crashed.session_id,
            in_flight=in_flight,
        )
        if phase == FaultPhase.INSTANT:
            self._restart(ctx, step, phase)

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        self._restart(ctx, step, FaultPhase.END)

    def _restart(self, ctx: StepContext, step: ResolvedStep, phase: str) -> None:
        session = ctx.workload().restart(self.producer)
        ctx.observe(step, restarted=session.session_id)
        ctx.log(step, phase, target=self.who, restarted=session.session_id)
