"""kill -9 a consumer between an effect and its commit (seed 004): the record's effect is in
the sink, its offset is not committed, so it is delivered again. A new session of the consumer
starts after `duration`, at once if unset.

Evidence: the consumer killed itself at its crash point, right after an effect (armed by a
signal); one that applied no effect after arming (it ended, or was killed from outside) did
not crash where seed 004 puts it, and the step did not take effect."""

from __future__ import annotations

from typing import Literal

from eoslab.fault_events import FaultPhase
from eoslab.nemesis.steps.base import ConsumerStep, ResolvedStep, StepContext, start_phase


class ConsumerCrashStep(ConsumerStep):
    kind: Literal["consumer-crash"]

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        consumers = ctx.consumers()
        generation = consumers.generation()
        crashed, between = consumers.crash_after_next_effect(self.consumer)
        evidence = (
            f"{self.who} killed between an effect and its commit (generation {generation})"
            if between
            else f"{self.who} applied no effect after the crash was armed: not killed "
            "between an effect and its commit"
        )
        ctx.judge(step, between, evidence, session_id=crashed.session_id, generation=generation)
        phase = start_phase(step)
        ctx.log(
            step,
            phase,
            target=self.who,
            session_id=crashed.session_id,
            between_effect_and_commit=between,
            generation=generation,
        )
        if phase == FaultPhase.INSTANT:
            self._restart(ctx, step, phase)

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        self._restart(ctx, step, FaultPhase.END)

    def _restart(self, ctx: StepContext, step: ResolvedStep, phase: str) -> None:
        session = ctx.consumers().restart(self.consumer)
        ctx.observe(step, restarted=session.session_id)
        ctx.log(step, phase, target=self.who, restarted=session.session_id)
