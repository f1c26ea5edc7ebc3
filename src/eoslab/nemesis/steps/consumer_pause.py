"""A zombie consumer (seed 004): stopped (SIGSTOP) right after an effect, outside any sink
transaction, for `duration` — past session.timeout.ms the coordinator gives its partitions
away — then resumed (SIGCONT): it may still apply what it had fetched, and its commits carry a
stale generation.

Evidence: it froze right after an effect, and the rest of the group moved to a newer
generation while it was frozen (it was evicted: a zombie). A consumer that came back before
the group moved on was only slow, and the step did not take effect."""

from __future__ import annotations

import time
from typing import ClassVar, Literal

from eoslab.fault_events import FaultPhase
from eoslab.nemesis.steps.base import ConsumerStep, ResolvedStep, StepContext


class ConsumerPauseStep(ConsumerStep):
    kind: Literal["consumer-pause"]
    needs_end: ClassVar[str | None] = "a consumer pause"

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        consumers = ctx.consumers()
        generation = consumers.generation()
        after_an_effect = consumers.freeze_after_next_effect(self.consumer)
        ctx.broke(
            step,
            f"resume {self.who}",
            lambda: consumers.resume(self.consumer),
            generation=generation,
            frozen_at=time.monotonic(),
            after_an_effect=after_an_effect,
        )
        ctx.judge(
            step,
            False,
            f"{self.who} frozen {'right after an effect' if after_an_effect else 'from outside'}",
            after_an_effect=after_an_effect,
            generation_before=generation,
        )
        ctx.log(
            step,
            FaultPhase.START,
            target=self.who,
            signal="SIGSTOP",
            after_an_effect=after_an_effect,
            generation=generation,
        )

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        memo = ctx.memo(step)
        moved_to = ctx.consumers().generation(excluding=self.consumer)
        frozen_s = round(time.monotonic() - memo["frozen_at"], 3)
        ctx.repair(step)
        evicted = moved_to > memo["generation"]
        after_an_effect = bool(memo["after_an_effect"])
        took_effect = evicted and after_an_effect
        evidence = (
            f"{self.who} frozen after an effect for {frozen_s:.1f} s; the group moved from "
            f"generation {memo['generation']} to {moved_to} without it"
            if evicted
            else f"{self.who} frozen for {frozen_s:.1f} s but the group stayed in generation "
            f"{memo['generation']}: it was never evicted"
        )
        ctx.judge(step, took_effect, evidence, frozen_s=frozen_s, generation_after=moved_to)
        ctx.log(
            step,
            FaultPhase.END,
            target=self.who,
            signal="SIGCONT",
            frozen_s=frozen_s,
            generation_after=moved_to,
        )
