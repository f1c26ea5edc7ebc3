"""A chaos-proxy fault on a broker's route (or on every route, ``target: "*"``); removed after
`duration`, else when the run heals.

Evidence: the proxy's own tally of the fault (frames it acted on, per API and connection),
read just before the fault is removed; a fault that never fired did not take effect."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator

from eoslab.fault_events import FaultPhase
from eoslab.nemesis.steps.base import (
    SERVICE_TARGETS,
    EndingStep,
    ResolvedStep,
    ServiceStep,
    StepContext,
)
from eoslab.proxy.faults import FAULT_SPEC_ADAPTER
from eoslab.proxy.faults.spec import ANY, FaultEvidence, FaultSpec


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

    def _route(self, ctx: StepContext, step: ResolvedStep) -> str:
        return ANY if step.target == ANY else ctx.service(step)

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        route = self._route(ctx, step)
        spec = self.spec(route)
        proxy = ctx.proxy()
        fault_id = proxy.add(spec)
        ctx.broke(
            step, f"remove proxy fault {fault_id}", lambda: proxy.remove(fault_id), id=fault_id
        )
        ctx.judge(step, False, f"{spec.kind} in place, nothing acted on yet", fault_id=fault_id)
        detail = spec.model_dump(mode="json", exclude_none=True)
        ctx.log(
            step,
            FaultPhase.START,
            kind=f"proxy:{spec.kind}",
            target=route,
            id=fault_id,
            spec=detail,
        )

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        route = self._route(ctx, step)
        fault_id = ctx.memo(step)["id"]
        evidence = FaultEvidence.model_validate(ctx.proxy().fault(fault_id)["evidence"])
        ctx.repair(step)
        took_effect, line = self.spec(route).took_effect(evidence)
        ctx.judge(step, took_effect, line, **evidence.model_dump(exclude_none=True))
        ctx.log(
            step,
            FaultPhase.END,
            kind=f"proxy:{self.fault['kind']}",
            target=route,
            id=fault_id,
            matched=evidence.matched,
            injected=evidence.injected,
            frames=evidence.frames,
        )
