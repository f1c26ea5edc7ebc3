"""SIGSTOP a broker (or a partition's followers) for `duration`, then SIGCONT: frozen with its
sockets open (a GC pause, a stalled VM), long enough to be taken for dead — or, for the
followers, a leader left acknowledging alone.

Evidence: each process was stopped by the signal, and for how long; for the leader, that
leadership of the partition moved while it was frozen (a zombie broker: the reference broker is
one node, where it cannot)."""

from __future__ import annotations

import time
from typing import ClassVar, Literal

from eoslab.fault_events import FaultPhase
from eoslab.nemesis.steps.base import (
    LEADER,
    EndingStep,
    ResolvedStep,
    ServiceStep,
    StepContext,
    judge_leadership,
    leader_now,
    on_each,
)
from eoslab.runtime.lab import ProcessState


class PauseStep(ServiceStep, EndingStep):
    kind: Literal["pause"]
    takes_followers: ClassVar[bool] = True
    needs_end: ClassVar[str | None] = "a pause"

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        services = ctx.services(step)
        pids: dict[str, int | None] = {}
        running = []

        def pause(service: str) -> None:
            ctx.runtime.pause(service)
            after = ctx.runtime.observe(service)
            pids[service] = after.pid
            if after.state is not ProcessState.STOPPED:
                running.append(f"{service} is {after.state}")

        on_each(services, pause, ctx.runtime.resume)

        def resume() -> None:
            for service in services:
                ctx.runtime.resume(service)

        stopped = ", ".join(f"pid {pid}" for pid in pids.values())
        evidence = "; ".join(running) if running else f"{stopped} stopped (SIGSTOP)"
        took_effect = bool(services) and not running
        ctx.broke(
            step,
            f"resume {', '.join(services)}",
            resume,
            paused_at=time.monotonic(),
            took_effect=took_effect,
            evidence=evidence,
            leader_before=services[0] if services else None,
        )
        ctx.judge(step, took_effect, evidence or "no service", pids=pids)
        ctx.log(step, FaultPhase.START, target=",".join(services), signal="SIGSTOP", pids=pids)

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        services = ctx.services(step)
        memo = dict(ctx.memo(step))
        paused_s = round(time.monotonic() - memo["paused_at"], 3)
        leader = {"leader_after": leader_now(ctx, self.partition)} if self.target == LEADER else {}
        if self.target == LEADER:
            judge_leadership(ctx, step, self.partition, memo, leader["leader_after"])
        ctx.repair(step)
        states = {s: str(ctx.runtime.observe(s).state) for s in services}
        ctx.observe(step, paused_s=paused_s, state_after=states, **leader)
        ctx.log(
            step,
            FaultPhase.END,
            target=",".join(services),
            signal="SIGCONT",
            paused_s=paused_s,
            **leader,
        )
