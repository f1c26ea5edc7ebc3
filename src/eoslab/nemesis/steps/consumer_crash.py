"""kill -9 a consumer between an effect and its commit (seed 004): the record's effect is in
the sink, its offset is not committed, so it is delivered again. A new session of the consumer
starts after `duration`, at once if unset.

Evidence: the consumer killed itself at its crash point, right after an effect (armed by a
signal); one that applied no effect after arming (it ended, or was killed from outside) did
not crash where seed 004 puts it, and the step did not take effect."""

from __future__ import annotations

from typing import Literal

from eoslab.nemesis.steps.base import ConsumerStep, ResolvedStep, RestartingStep, StepContext


class ConsumerCrashStep(ConsumerStep, RestartingStep):
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
        self._killed(
            ctx,
            step,
            session_id=crashed.session_id,
            between_effect_and_commit=between,
            generation=generation,
        )

    def _new_session(self, ctx: StepContext) -> str:
        return ctx.consumers().restart(self.consumer).session_id
