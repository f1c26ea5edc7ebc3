"""Lossy links inside the cluster: the links of a shape or of groups, as a partition names them
(:mod:`~eoslab.nemesis.steps.links`), drop each packet they carry with ``probability`` (an
iptables rule with ``-m statistic --mode random``: the kernel draws, so which packets go is not
seeded; the rule's counter says how many did). TCP resends what is lost, backing off: the
links stay up, slower. Healed after ``duration``, at a ``heal`` step, else when the run heals,
and by ``lab down``.

Evidence: some partition's acknowledgements took :data:`SLOWER_BY_MS` longer (median) while
the links were lossy than just before, with the packets dropped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from eoslab.nemesis.steps.base import ResolvedStep, StepContext
from eoslab.nemesis.steps.links import DegradedLinkStep
from eoslab.runtime.netfaults import Action, Loss

SLOWER_BY_MS = 100.0
"""How much longer some partition's acknowledgements must take: a lost segment costs TCP a
retransmission timeout, 200 ms at least."""


class LinkLossStep(DegradedLinkStep):
    kind: Literal["link-loss"]
    probability: float = Field(gt=0, lt=1, description="the chance each packet is dropped")

    def slower_by_ms(self) -> float:
        return SLOWER_BY_MS

    def degrade(self, ctx: StepContext, step: ResolvedStep) -> tuple[Action, Callable[[], Any]]:
        return Loss(self.probability), lambda: None
