"""A network partition: connections are accepted but nothing passes either way until the fault
is removed or its window ends."""

from __future__ import annotations

from typing import ClassVar, Literal

from eoslab.proxy.faults.spec import FaultSpec, FaultState, FrameContext, FrameVerdict


class BlackholeSpec(FaultSpec):
    kind: Literal["blackhole"]

    verb: ClassVar[str] = "held"

    def act(self, fault: FaultState, verdict: FrameVerdict, frame: FrameContext) -> bool:
        verdict.hit(fault, frame)
        verdict.hold = True
        return False
