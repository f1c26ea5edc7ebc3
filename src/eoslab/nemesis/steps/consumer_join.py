"""One more consumer joins the group (a rebalance), and leaves it cleanly after `duration`
(another): several of them make a rebalance storm.

Evidence: the group rebalanced while it was there (a newer generation). A new consumer is a
new process that takes a second or more to join on a busy machine: the step's end waits for
the rebalance (at most :data:`JOIN_WAIT_S`) before the consumer leaves, so that a short
``duration`` still means "joined, then left"."""

from __future__ import annotations

from typing import Literal

from eoslab.clock import wait_until
from eoslab.fault_events import FaultPhase
from eoslab.nemesis.steps.base import EndingStep, ResolvedStep, ScenarioShape, StepContext

JOIN_WAIT_S = 20.0


class ConsumerJoinStep(EndingStep):
    kind: Literal["consumer-join"]

    def misfit(self, scenario: ScenarioShape) -> str | None:
        return None if scenario.consumers else "kind: consumer-join needs a consumer workload"

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        consumers = ctx.consumers()
        generation = consumers.generation()
        joined = consumers.join()
        who = f"consumer-{joined}"
        ctx.broke(
            step,
            f"{who} leaves",
            lambda: consumers.leave(joined),
            consumer=joined,
            generation=generation,
        )
        ctx.judge(step, False, f"{who} started", consumer=joined, generation_before=generation)
        ctx.log(step, FaultPhase.START, target=who, generation=generation)

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        memo = ctx.memo(step)
        who = f"consumer-{memo['consumer']}"
        consumers = ctx.consumers()
        wait_until(lambda: consumers.generation() > memo["generation"], JOIN_WAIT_S, 0.1)
        generation = consumers.generation()
        ctx.repair(step)
        rebalanced = generation > memo["generation"]
        ctx.judge(
            step,
            rebalanced,
            f"{who} joined: generation {memo['generation']} -> {generation}"
            if rebalanced
            else f"{who} came and went without a rebalance (generation {generation})",
            generation_after=generation,
        )
        ctx.log(step, FaultPhase.END, target=who, left=True, generation=generation)
