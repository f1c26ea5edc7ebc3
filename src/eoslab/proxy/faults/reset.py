"""Close both sides of a connection on a matching frame, or of every current one at once
(`immediate`)."""

from __future__ import annotations

from typing import ClassVar, Literal, Self

from pydantic import Field, model_validator

from eoslab.proxy.faults.spec import ANY, DirectedFaultSpec, FaultState, FrameContext, FrameVerdict


class ResetSpec(DirectedFaultSpec):
    kind: Literal["reset"]
    immediate: bool = Field(False, description="reset the route's current connections at once")

    verb: ClassVar[str] = "reset connections at"

    @model_validator(mode="after")
    def _immediate_has_no_frame_trigger(self) -> Self:
        frame_fields = ("count", "probability", "direction", "start_ms", "start_at_ms")
        if self.immediate and self.api != ANY:
            raise ValueError("api: an immediate reset takes no api selector")
        for name in frame_fields:
            if self.immediate and getattr(self, name) is not None:
                raise ValueError(f"{name}: an immediate reset takes no frame trigger")
        return self

    def per_frame(self) -> bool:
        return not self.immediate

    def act(self, fault: FaultState, verdict: FrameVerdict, frame: FrameContext) -> bool:
        verdict.hit(fault, frame)
        verdict.reset = True
        return True
