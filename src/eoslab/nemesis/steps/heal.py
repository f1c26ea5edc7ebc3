"""Heal every network partition, slow or lossy link of the run still in place (Jepsen's
``:stop``): each ends as its own end would, its evidence read (what moved, the cluster whole
again; the acknowledgements slowed). For timelines whose partitions have no duration of their
own, as in Jepsen's start/stop cycles.

Evidence: the partitions it ended, and that no link of the run is cut afterwards; a heal with
no partition to end did not take effect (the timeline is not what its scenario says)."""

from __future__ import annotations

from typing import Literal

from eoslab.fault_events import FaultPhase
from eoslab.nemesis.steps.base import ResolvedStep, Step, StepContext
from eoslab.nemesis.steps.links import NETWORK_KINDS


class HealStep(Step):
    kind: Literal["heal"]

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        ended = ctx.end_faults(NETWORK_KINDS)
        run = f"{ctx.context.run_id}/"
        left = [str(cut) for cut in ctx.network().active() if cut.tag.startswith(run)]
        steps = [s.index for s in ended]
        if left:
            took_effect, evidence = False, f"still cut after the heal: {'; '.join(left)}"
        elif not ended:
            took_effect, evidence = False, "no partition was in place to heal"
        else:
            took_effect = True
            evidence = (
                f"healed the partition(s) of step(s) {', '.join(map(str, steps))}: no link cut"
            )
        ctx.judge(step, took_effect, evidence, healed_steps=steps, still_cut=left)
        ctx.log(step, FaultPhase.INSTANT, healed_steps=steps, still_cut=left)
