"""A delay per frame drawn uniformly from mean ± jitter (never below zero), from the fault's
own seeded generator."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from eoslab.proxy.faults.spec import DirectedFaultSpec, FaultState, FrameContext, FrameVerdict


class LatencySpec(DirectedFaultSpec):
    kind: Literal["latency"]
    mean_ms: float = Field(ge=0)
    jitter_ms: float = Field(0.0, ge=0)

    verb: ClassVar[str] = "delayed"

    def act(self, fault: FaultState, verdict: FrameVerdict, frame: FrameContext) -> bool:
        low, high = self.mean_ms - self.jitter_ms, self.mean_ms + self.jitter_ms
        delay_s = max(0.0, fault.random.uniform(low, high)) / 1000
        verdict.hit(fault, frame, delay_s)
        verdict.delay_until(verdict.now + verdict.delay_s + delay_s)
        return False
