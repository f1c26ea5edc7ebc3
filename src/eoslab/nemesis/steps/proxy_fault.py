"""A chaos-proxy fault on a broker's route (or on every route, ``target: "*"``); removed after
`duration`, else when the run heals."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import field_validator

from eoslab.nemesis.steps.base import (
    SERVICE_TARGETS,
    EndingStep,
    ServiceStep,
    StepContext,
    start_phase,
)
from eoslab.proxy.fault_spec import ANY, FAULT_SPEC_ADAPTER, FaultSpec

if TYPE_CHECKING:
    from eoslab.nemesis.timeline import ResolvedStep


class ProxyStep(ServiceStep, EndingStep):
    kind: Literal["proxy"]
    fault: dict[str, Any]

    @field_validator("target")
    @classmethod
    def _known_service(cls, target: str) -> str:
        if target != ANY and target not in SERVICE_TARGETS:
            raise ValueError(
                f"unknown target {target!r}; one of {', '.join(map(repr, SERVICE_TARGETS))} or {ANY!r}"
            )
        return target

    @field_validator("fault")
    @classmethod
    def _valid_fault(cls, fault: dict[str, Any]) -> dict[str, Any]:
        if "route" in fault:
            raise ValueError("route: set by the step's target, not in the fault")
        FAULT_SPEC_ADAPTER.validate_python(fault)
        return fault

    def spec(self, route: str) -> FaultSpec:
        return FAULT_SPEC_ADAPTER.validate_python({**self.fault, "route": route})

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        route = ANY if step.target == ANY else ctx.service(step)
        spec = self.spec(route)
        proxy = ctx.proxy()
        fault_id = proxy.add(spec)
        ctx.broke(
            step, f"remove proxy fault {fault_id}", lambda: proxy.remove(fault_id), id=fault_id
        )
        detail = spec.model_dump(mode="json", exclude_none=True)
        kind = f"proxy:{spec.kind}"
        ctx.log(kind, route, start_phase(step), step=step.index, id=fault_id, spec=detail)

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        fault_id = ctx.memo(step)["id"]
        counts = {f["id"]: f for f in ctx.proxy().faults()}.get(fault_id, {})
        ctx.repair(step)
        route = ANY if step.target == ANY else ctx.service(step)
        ctx.log(
            f"proxy:{self.fault['kind']}",
            route,
            "end",
            step=step.index,
            id=fault_id,
            matched=counts.get("matched"),
            injected=counts.get("injected"),
        )
