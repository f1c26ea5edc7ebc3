"""At most `bytes_per_s` through the matching frames, summed over the route's connections."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from eoslab.proxy.faults.spec import DirectedFaultSpec, FaultState, FrameContext, FrameVerdict


class BandwidthSpec(DirectedFaultSpec):
    kind: Literal["bandwidth"]
    bytes_per_s: int = Field(gt=0)

    verb: ClassVar[str] = "throttled"

    def act(self, fault: FaultState, verdict: FrameVerdict, frame: FrameContext) -> bool:
        ready_at = verdict.now + verdict.delay_s
        done_at = max(ready_at, fault.bandwidth_free_at) + frame.size / self.bytes_per_s
        fault.bandwidth_free_at = done_at
        verdict.hit(fault, frame, done_at - ready_at)
        verdict.delay_until(done_at)
        return False
