"""kill -9 a broker (or a partition's followers); restarted after `duration`, else when the run
heals.

Evidence: each process was running and is dead after the signal (its pid); and the kill landed
where the scenario means it to:

- the leader: leadership of the partition moved (seen at the fault's end, or once the broker is
  back: Kafka moves it once the dead broker's session expires). A leader that kept its
  leadership was never lost; the reference broker is one node, where leadership cannot move;
- the transaction coordinator: producer 0 had a transaction begun and not settled (open, or its
  commit or abort under way) before the kill and still after it: the coordinator died holding
  it. Killed between two transactions, the failover had nothing to recover. The kill waits
  (at most :data:`OPEN_WAIT_S`) for a transaction open and not yet ending, so that a kill at the
  step's time does not fall in the moment between two (a run of stop 40 killed one there);
- the group coordinator: the consumer group was in a generation (formed: every member in the
  same one, every partition assigned): the coordinator died holding a live group.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from eoslab.clock import wait_until
from eoslab.fault_events import FaultPhase
from eoslab.nemesis.steps.base import (
    COORDINATOR,
    LEADER,
    TXN_COORDINATOR,
    EndingStep,
    ResolvedStep,
    ServiceStep,
    StepContext,
    judge_leadership,
    leader_now,
    on_each,
)
from eoslab.runtime.lab import ProcessState

OPEN_WAIT_S = 5.0
"""How long a kill of the transaction coordinator waits for producer 0's next open transaction."""


class KillStep(ServiceStep, EndingStep):
    kind: Literal["kill"]
    takes_followers: ClassVar[bool] = True

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        services = ctx.services(step)
        held = _held(ctx, self.target)
        pids: dict[str, int | None] = {}
        stale = []

        def kill(service: str) -> None:
            before = ctx.runtime.observe(service)
            ctx.runtime.kill(service)
            after = ctx.runtime.observe(service)
            pids[service] = before.pid
            if before.state is ProcessState.DEAD or after.state is not ProcessState.DEAD:
                stale.append(
                    f"{service} was {before.state} before the kill and {after.state} after"
                )

        on_each(services, kill, ctx.runtime.restart)
        observed: dict[str, Any] = {"pids": pids}
        if self.target == LEADER:
            observed["leader_before"] = services[0]
        killed = ", ".join(f"pid {pid}" for pid in pids.values())
        evidence = "; ".join(stale) if stale else f"{killed} killed (SIGKILL)"
        took_effect = bool(services) and not stale
        landed, where = _landed(ctx, self.target, held)
        if where:
            evidence += f", {where}"
            observed["held"] = held
        took_effect = took_effect and landed
        ctx.broke(
            step,
            f"restart {', '.join(services)}",
            lambda: _restart(ctx, services),
            took_effect=took_effect,
            evidence=evidence,
            leader_before=services[0] if services else None,
        )
        ctx.judge(step, took_effect, evidence or "no service", **observed)
        ctx.log(step, FaultPhase.START, target=",".join(services), signal="SIGKILL", **observed)

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        services = ctx.services(step)
        memo = dict(ctx.memo(step))
        observed: dict[str, Any] = {}
        if self.target == LEADER:
            observed["leader_after"] = leader_now(ctx, self.partition)
        ctx.repair(step)
        observed["restarted_pids"] = {s: ctx.runtime.observe(s).pid for s in services}
        if self.target == LEADER:
            seen = [observed["leader_after"]]
            if seen[0] == memo["leader_before"]:  # Kafka may move it only once the session ends
                observed["leader_after_restart"] = leader_now(ctx, self.partition)
                seen.append(observed["leader_after_restart"])
            judge_leadership(ctx, step, self.partition, memo, *seen)
        ctx.observe(step, **observed)
        ctx.log(step, FaultPhase.END, target=",".join(services), restarted=True, **observed)


def _held(ctx: StepContext, target: str) -> Any:
    """What the target held just before the kill that the kill must land inside: producer 0's
    unsettled transaction (the transaction coordinator), the group's generation (the group
    coordinator); None for other targets."""
    if target == TXN_COORDINATOR:
        workload = ctx.workload()
        return wait_until(
            lambda: _open(workload.unsettled_transaction(0)), OPEN_WAIT_S, interval_s=0.01
        ) or workload.unsettled_transaction(0)
    if target == COORDINATOR:
        consumers = ctx.consumers()
        return {"generation": consumers.generation(), "formed": consumers.settled()}
    return None


def _open(transaction: dict[str, Any] | None) -> dict[str, Any] | None:
    """The transaction if it is open (begun, its commit or abort not yet asked for)."""
    return transaction if transaction is not None and not transaction["ending"] else None


def _landed(ctx: StepContext, target: str, held: Any) -> tuple[bool, str]:
    """Whether the kill landed inside what ``held`` says the target held, read again now (the
    same transaction still unsettled; a formed group in a generation), with a phrase saying so
    ("" for targets without such a condition)."""
    if target == TXN_COORDINATOR:
        now = ctx.workload().unsettled_transaction(0)
        if held is None or now is None or now["txn"] != held["txn"]:
            return False, "between two transactions of producer 0 (none held by the coordinator)"
        state = "its commit or abort under way" if now["ending"] else "open"
        return True, f"inside transaction {held['txn']} of producer 0 ({state})"
    if target == COORDINATOR:
        if held["formed"] and held["generation"] > 0:
            return True, f"the group in generation {held['generation']}"
        return False, (
            f"the group was not formed in a generation (generation {held['generation']}): "
            "no live group to fail over"
        )
    return True, ""


def _restart(ctx: StepContext, services: list[str]) -> None:
    for service in services:
        ctx.runtime.restart(service)
