"""One more consumer joins the group (a rebalance), and leaves it cleanly after `duration`
(another): several of them make a rebalance storm."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from eoslab.nemesis.steps.base import EndingStep, ScenarioShape, StepContext, start_phase

if TYPE_CHECKING:
    from eoslab.nemesis.timeline import ResolvedStep


class ConsumerJoinStep(EndingStep):
    kind: Literal["consumer-join"]

    def misfit(self, scenario: ScenarioShape) -> str | None:
        return None if scenario.consumers else "kind: consumer-join needs a consumer workload"

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        consumers = ctx.consumers()
        joined = consumers.join()
        who = f"consumer-{joined}"
        ctx.broke(step, f"{who} leaves", lambda: consumers.leave(joined), consumer=joined)
        ctx.log("consumer-join", who, start_phase(step), step=step.index)

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        who = f"consumer-{ctx.memo(step)['consumer']}"
        ctx.repair(step)
        ctx.log("consumer-join", who, "end", step=step.index, left=True)
