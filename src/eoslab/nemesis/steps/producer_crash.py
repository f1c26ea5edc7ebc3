"""kill -9 a producer process; a new session (a new PID) starts after `duration`, at once if
unset.

Evidence: the session that was running was killed, and how many of its records were in
flight (settled as indeterminate). An idempotent session must have been killed with records in
flight (what a crash leaves uncertain); killed with none, it was a clean stop in all but name.
A transactional session must have been killed inside a transaction (begun, its commit or abort
not yet asked for: what the crash leaves for the coordinator to abort); killed between two,
the step did not take effect. So a transactional session is first stopped at its freeze point
(inside a transaction with a record acknowledged, the zombie's point of ``producer-zombie``) and
killed there: a kill at a moment chosen by the clock alone lands in a commit's round trip now
and then (CI's run of stop 38: "between two transactions" on the reference broker)."""

from __future__ import annotations

from typing import Literal

from eoslab.nemesis.steps.base import ProducerStep, ResolvedStep, RestartingStep, StepContext


class ProducerCrashStep(ProducerStep, RestartingStep):
    kind: Literal["producer-crash"]

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        workload = ctx.workload()
        if workload.transactional:
            workload.freeze_mid_transaction(self.producer)  # ended first: killed as it stands
        crashed, in_flight = workload.crash(self.producer)
        killed = f"session {crashed.session_id[:8]} killed (SIGKILL) with {in_flight} record(s) in flight"
        observed: dict[str, object] = {"session_id": crashed.session_id, "in_flight": in_flight}
        took_effect = in_flight > 0
        if not workload.transactional and not in_flight:
            killed += ": nothing in flight for the crash to leave uncertain"
        if workload.transactional:
            left_open = workload.open_transaction(crashed.session_id)
            observed["open_txn"] = left_open
            took_effect = left_open is not None
            killed += (
                f", transaction {left_open['txn']} open ({left_open['records']} records)"
                if left_open is not None
                else ", between two transactions (none left open)"
            )
        ctx.judge(step, took_effect, killed, **observed)
        self._killed(ctx, step, session_id=crashed.session_id, in_flight=in_flight)

    def _new_session(self, ctx: StepContext) -> str:
        return ctx.workload().restart(self.producer).session_id
