"""kill -9 a broker (or a partition's followers); restarted after `duration`, else when the run
heals.

Evidence: each process was running and is dead after the signal (its pid); for a leader, who
leads the partition once the fault ends (Kafka moves leadership; the reference broker is one
node)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from eoslab.fault_events import FaultPhase
from eoslab.nemesis.steps.base import (
    LEADER,
    EndingStep,
    ResolvedStep,
    ServiceStep,
    StepContext,
    leader_now,
)
from eoslab.runtime.lab import ProcessState


class KillStep(ServiceStep, EndingStep):
    kind: Literal["kill"]
    takes_followers: ClassVar[bool] = True

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        services = ctx.services(step)
        pids: dict[str, int | None] = {}
        stale = []
        for service in services:
            before = ctx.runtime.observe(service)
            ctx.runtime.kill(service)
            after = ctx.runtime.observe(service)
            pids[service] = before.pid
            if before.state is ProcessState.DEAD or after.state is not ProcessState.DEAD:
                stale.append(
                    f"{service} was {before.state} before the kill and {after.state} after"
                )
        ctx.broke(step, f"restart {', '.join(services)}", lambda: _restart(ctx, services))
        observed: dict[str, Any] = {"pids": pids}
        if self.target == LEADER:
            observed["leader_before"] = services[0]
        killed = ", ".join(f"pid {pid}" for pid in pids.values())
        evidence = "; ".join(stale) if stale else f"{killed} killed (SIGKILL)"
        ctx.judge(step, bool(services) and not stale, evidence or "no service", **observed)
        ctx.log(step, FaultPhase.START, target=",".join(services), signal="SIGKILL", **observed)

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        services = ctx.services(step)
        observed: dict[str, Any] = {}
        if self.target == LEADER:
            observed["leader_after"] = leader_now(ctx, self.partition)
        ctx.repair(step)
        observed["restarted_pids"] = {s: ctx.runtime.observe(s).pid for s in services}
        ctx.observe(step, **observed)
        ctx.log(step, FaultPhase.END, target=",".join(services), restarted=True, **observed)


def _restart(ctx: StepContext, services: list[str]) -> None:
    for service in services:
        ctx.runtime.restart(service)
