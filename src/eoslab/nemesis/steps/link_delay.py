"""Slow links inside the cluster (netem's delay, without netem): the links of a shape or of
groups, as a partition names them (:mod:`~eoslab.nemesis.steps.links`), hold every packet
they carry for ``delay_ms`` plus or minus a seeded ``jitter_ms`` (which may reorder them), by a
program the lab's rules queue the packets to (:mod:`eoslab.runtime.linkdelay`). Healed after
``duration``, at a ``heal`` step, else when the run heals; if the program dies the packets pass
unheld, and ``lab down`` removes the rules.

Evidence: some partition's acknowledgements took at least half the delay longer (median) while
the links were slow than just before, with the packets held and for how long."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from eoslab.nemesis.steps.base import ResolvedStep, StepContext
from eoslab.nemesis.steps.links import DegradedLinkStep
from eoslab.runtime.linkdelay import Delayer
from eoslab.runtime.netfaults import Action, Hold

QUEUE_BASE = 1000
"""The first netfilter queue a lab's delays try: this plus the lab's port offset."""
LIFETIME_MARGIN_S = 120.0
"""How long a delay program outlives its step's duration before it ends itself."""
UNBOUNDED_S = 1800.0
"""A delay program's lifetime when its step has no duration of its own."""


class LinkDelayStep(DegradedLinkStep):
    kind: Literal["link-delay"]
    delay_ms: float = Field(gt=0, le=10_000, description="how long each packet is held")
    jitter_ms: float = Field(0.0, ge=0, description="plus or minus this much, drawn per packet")

    def slower_by_ms(self) -> float:
        return self.delay_ms / 2

    def degrade(self, ctx: StepContext, step: ResolvedStep) -> tuple[Action, Callable[[], Any]]:
        lifetime = (self.length_s or UNBOUNDED_S) + LIFETIME_MARGIN_S
        delayer = Delayer.start(
            QUEUE_BASE + ctx.network().config.port_offset,
            self.delay_ms,
            self.jitter_ms,
            f"link-delay:{ctx.context.seed}:{step.index}",
            lifetime,
        )
        return Hold(delayer.queue), delayer.stop
