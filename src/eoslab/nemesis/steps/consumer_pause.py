"""A zombie consumer (seed 004): stopped (SIGSTOP) right after an effect, outside any sink
transaction, for `duration` — past session.timeout.ms the coordinator gives its partitions
away — then resumed (SIGCONT): it may still apply what it had fetched, and its commits carry a
stale generation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Self

from pydantic import model_validator

from eoslab.nemesis.steps.base import ConsumerStep, StepContext

if TYPE_CHECKING:
    from eoslab.nemesis.timeline import ResolvedStep


class ConsumerPauseStep(ConsumerStep):
    kind: Literal["consumer-pause"]

    @model_validator(mode="after")
    def _has_end(self) -> Self:
        if self.length_s is None:
            raise ValueError("duration: a consumer pause needs a duration (or until)")
        return self

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        consumers = ctx.consumers()
        after_an_effect = consumers.freeze_after_next_effect(self.consumer)
        ctx.broke(step, f"resume {self.who}", lambda: consumers.resume(self.consumer))
        ctx.log(
            "consumer-pause",
            self.who,
            "start",
            step=step.index,
            signal="SIGSTOP",
            after_an_effect=after_an_effect,
        )

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        ctx.repair(step)
        ctx.log("consumer-pause", self.who, "end", step=step.index, signal="SIGCONT")
