"""Forward the request, swallow its response: a lost ack (seed 003, fig. 3).

librdkafka only retries after a request timeout or a disconnect, hence `reset`.
"""

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


class DropResponseSpec(FrameFaultSpec):
    kind: Literal["drop-response"]
    reset: bool = Field(False, description="then reset the connection")

    verb: ClassVar[str] = "swallowed responses:"

    def selected_direction(self) -> Direction | None:
        return Direction.RESPONSE

    def act(self, fault: FaultState, verdict: FrameVerdict, frame: FrameContext) -> bool:
        verdict.hit(fault, frame)
        verdict.drop = True
        verdict.reset = self.reset
        return True
