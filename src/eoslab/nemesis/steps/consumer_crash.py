"""kill -9 a consumer between an effect and its commit (seed 004): the record's effect is in
the sink, its offset is not committed, so it is delivered again. A new session of the consumer
starts after `duration`, at once if unset."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from eoslab.nemesis.steps.base import ConsumerStep, StepContext, start_phase

if TYPE_CHECKING:
    from eoslab.nemesis.timeline import ResolvedStep


class ConsumerCrashMissedError(RuntimeError):
    """The crash did not land where seed 004 puts it; the run's verdict would not test it."""


class ConsumerCrashStep(ConsumerStep):
    kind: Literal["consumer-crash"]

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        crashed, between = ctx.consumers().crash_after_next_effect(self.consumer)
        phase = start_phase(step)
        ctx.log(
            "consumer-crash",
            self.who,
            phase,
            step=step.index,
            session_id=crashed.session_id,
            between_effect_and_commit=between,
        )
        if phase == "instant":
            self._restart(ctx, step, phase)
        if not between:
            raise ConsumerCrashMissedError(
                f"{self.who} was not killed between an effect and its commit: it applied no "
                "effect after the crash was armed (it ended or was killed from outside)"
            )

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        self._restart(ctx, step, "end")

    def _restart(self, ctx: StepContext, step: ResolvedStep, phase: str) -> None:
        session = ctx.consumers().restart(self.consumer)
        ctx.log("consumer-crash", self.who, phase, step=step.index, restarted=session.session_id)
