"""A state or request fault of the reference broker (its control API, see refbroker/faults.py);
the broker is set back as configured after `duration`, else when the run heals."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import field_validator

from eoslab.nemesis.steps.base import EndingStep, ScenarioShape, StepContext, start_phase
from eoslab.refbroker.faults import FAULT_ADAPTER

if TYPE_CHECKING:
    from eoslab.nemesis.timeline import ResolvedStep


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

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        refbroker = ctx.refbroker()
        answer = refbroker.apply(self.fault)
        ctx.broke(step, "set the reference broker back as configured", refbroker.clear)
        kind = f"refbroker:{self.fault['kind']}"
        ctx.log(kind, "refbroker", start_phase(step), step=step.index, applied=answer)

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        ctx.repair(step)
        ctx.log(f"refbroker:{self.fault['kind']}", "refbroker", "end", step=step.index)
