"""Swallow a request: the broker never sees it (the lost request of seed 003, fig. 4)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from eoslab.proxy.faults.spec import (
    Direction,
    FaultState,
    FrameContext,
    FrameFaultSpec,
    FrameVerdict,
)


class DropRequestSpec(FrameFaultSpec):
    kind: Literal["drop-request"]
    reset: bool = Field(False, description="then reset the connection")

    verb: ClassVar[str] = "dropped requests:"

    def selected_direction(self) -> Direction | None:
        return Direction.REQUEST

    def act(self, fault: FaultState, verdict: FrameVerdict, frame: FrameContext) -> bool:
        verdict.hit(fault, frame)
        verdict.drop = True
        verdict.reset = self.reset
        return True
