"""One more consumer joins the group (a rebalance), and leaves it cleanly after `duration`
(another): several of them make a rebalance storm.

Evidence: a rebalance of its own admitted the new consumer: it became a member in a generation
newer than the group's when it started, and no other step's consumer was admitted in that same
generation (two consumers let in by one rebalance are one rebalance, not two: a storm of N joins
must make N). A new consumer is a new process that takes a second or more to join on a busy
machine: the step's end waits for its admission (at most :data:`JOIN_WAIT_S`) before the
consumer leaves, so that a short ``duration`` still means "joined, then left"; and its start
waits (as long at most) for the group to have settled from whatever came before (an earlier
join not yet admitted, a crashed member's restart), so that joins seconds apart on a loaded
machine are not let in by one rebalance (`make conformance` 2026-12-07: 5 s apart, two joins
admitted together on six cells). ``settled_before`` in what it observed says whether it had."""

from __future__ import annotations

from typing import ClassVar, Literal

from eoslab.clock import wait_until
from eoslab.fault_events import FaultPhase
from eoslab.nemesis.steps.base import EndingStep, ResolvedStep, ScenarioShape, StepContext

JOIN_WAIT_S = 20.0


class ConsumerJoinStep(EndingStep):
    kind: Literal["consumer-join"]
    settle_wait_s: ClassVar[float] = JOIN_WAIT_S

    def misfit(self, scenario: ScenarioShape) -> str | None:
        return None if scenario.consumers else "kind: consumer-join needs a consumer workload"

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        consumers = ctx.consumers()
        settled = bool(wait_until(consumers.settled, self.settle_wait_s, 0.1))
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
        ctx.judge(
            step,
            False,
            f"{who} started",
            consumer=joined,
            generation_before=generation,
            settled_before=settled,
        )
        ctx.log(step, FaultPhase.START, target=who, generation=generation)

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        memo = ctx.memo(step)
        who = f"consumer-{memo['consumer']}"
        consumers = ctx.consumers()
        before = memo["generation"]
        wait_until(
            lambda: _admitted(consumers.generations(memo["consumer"]), before) > 0, JOIN_WAIT_S, 0.1
        )
        member_of = consumers.generations(memo["consumer"])
        admitted = _admitted(member_of, before)
        generation = consumers.generation()
        ctx.repair(step)
        shared = (
            ctx.claim(step, f"rebalance to generation {admitted}") if admitted > before else None
        )
        if admitted <= before:
            took_effect, evidence = (
                False,
                (
                    f"{who} came and went without being admitted by a rebalance (the group in "
                    f"generation {generation}; {who} a member in {member_of or 'none'})"
                ),
            )
        elif shared is not None:
            took_effect, evidence = (
                False,
                (
                    f"{who} was admitted in generation {admitted} by the rebalance that admitted "
                    f"step {shared}'s consumer: no rebalance of its own"
                ),
            )
        else:
            took_effect, evidence = True, f"{who} joined: generation {before} -> {admitted}"
        ctx.judge(step, took_effect, evidence, generation_after=generation, admitted_in=admitted)
        ctx.log(step, FaultPhase.END, target=who, left=True, generation=generation)


def _admitted(generations: list[int], before: int) -> int:
    """The rebalance that admitted a consumer: the first generation it was a member in above the
    group's when it started (-1: none yet). A new KIP-848 member can first report the group's
    epoch of before its own join."""
    return next((g for g in generations if g > before), -1)
