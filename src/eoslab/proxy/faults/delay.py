"""Hold each matching frame for a fixed time; later frames wait behind it, as on a real link."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from eoslab.proxy.faults.spec import DirectedFaultSpec, FaultState, FrameContext, FrameVerdict


class DelaySpec(DirectedFaultSpec):
    kind: Literal["delay"]
    ms: float = Field(ge=0)

    verb: ClassVar[str] = "delayed"

    def act(self, fault: FaultState, verdict: FrameVerdict, frame: FrameContext) -> bool:
        delay_s = self.ms / 1000
        verdict.hit(fault, frame, delay_s)
        verdict.delay_until(verdict.now + verdict.delay_s + delay_s)
        return False
