"""A crafted Produce exchange from the protocol-level client (eoslab.probe), played on the run's
topic as a producer session of its own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from eoslab.nemesis.steps.base import PartitionStep, StepContext
from eoslab.probe.scenarios import SCENARIO_PROBES, ProbeName

if TYPE_CHECKING:
    from eoslab.nemesis.timeline import ResolvedStep


class ProbeStep(PartitionStep):
    kind: Literal["probe"]
    probe: ProbeName

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        where = f"partition-{self.partition}"
        ctx.log("probe", where, "start", step=step.index, probe=self.probe)
        outcome = SCENARIO_PROBES[self.probe](
            bootstrap=ctx.bootstrap,
            topic=ctx.topic,
            partition=self.partition,
            run_dir=ctx.run_dir,
            run_id=ctx.run_dir.run_id,
        )
        ctx.log("probe", where, "end", step=step.index, probe=self.probe, outcome=outcome)
