"""A state or request fault of the reference broker (its control API, see refbroker/faults.py);
the broker is set back as configured after `duration`, else when the run heals.

Evidence: the fault's own judgement (refbroker/faults.py) from the control API's counters and
state before it was applied and when it ends: a request fault must have met a request."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import field_validator

from eoslab.fault_events import FaultPhase
from eoslab.nemesis.steps.base import EndingStep, ResolvedStep, ScenarioShape, StepContext
from eoslab.refbroker.faults import FAULT_ADAPTER, Snapshot

if TYPE_CHECKING:
    from eoslab.refbroker.control_client import RefbrokerControl


def snapshot(refbroker: RefbrokerControl) -> Snapshot:
    return Snapshot(counters=refbroker.counters(), state=refbroker.state())


class RefbrokerStep(EndingStep):
    kind: Literal["refbroker"]
    fault: dict[str, Any]

    @field_validator("fault")
    @classmethod
    def _valid_fault(cls, fault: dict[str, Any]) -> dict[str, Any]:
        FAULT_ADAPTER.validate_python(fault)
        return fault

    def misfit(self, scenario: ScenarioShape) -> str | None:
        if set(self.on or scenario.targets) != {"refbroker"}:
            return "on: a refbroker fault needs on: [refbroker] (the scenario also targets kafka)"
        return None

    @property
    def fault_kind(self) -> str:
        return f"refbroker:{self.fault['kind']}"

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        refbroker = ctx.refbroker()
        before = snapshot(refbroker)
        answer = refbroker.apply(self.fault)
        ctx.broke(
            step,
            "set the reference broker back as configured",
            refbroker.clear,
            before=before,
            applied=answer,
        )
        ctx.judge(step, False, "applied, not yet judged", applied=answer)
        ctx.log(step, FaultPhase.START, kind=self.fault_kind, target="refbroker", applied=answer)

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        memo = ctx.memo(step)
        after = snapshot(ctx.refbroker())
        ctx.repair(step)
        took_effect, line = FAULT_ADAPTER.validate_python(self.fault).took_effect(
            memo["applied"], memo["before"], after
        )
        ctx.judge(step, took_effect, line)
        ctx.log(step, FaultPhase.END, kind=self.fault_kind, target="refbroker", evidence=line)
