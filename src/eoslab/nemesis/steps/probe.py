"""A crafted Produce exchange from the protocol-level client (eoslab.probe), played on the run's
topic as a producer session of its own.

Evidence: the broker answered the probe's requests (the answers, errors included)."""

from __future__ import annotations

from typing import Literal

from eoslab.fault_events import FaultPhase
from eoslab.nemesis.steps.base import PartitionStep, ResolvedStep, StepContext
from eoslab.probe.scenarios import SCENARIO_PROBES, ProbeName


class ProbeStep(PartitionStep):
    kind: Literal["probe"]
    probe: ProbeName

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        where = f"partition-{self.partition}"
        ctx.log(step, FaultPhase.START, target=where, probe=self.probe)
        run = ctx.context
        outcome = SCENARIO_PROBES[self.probe](
            bootstrap=run.bootstrap,
            topic=run.topic,
            partition=self.partition,
            run_dir=run.run_dir,
            run_id=run.run_id,
        )
        answers = outcome.get("answers", [])
        errors = sorted({a["error"] for a in answers if a.get("error") not in (None, "NONE")})
        line = f"{self.probe}: {len(answers)} Produce answer(s)" + (
            f", errors {', '.join(errors)}" if errors else ""
        )
        ctx.judge(step, bool(answers), line if answers else f"{self.probe}: no answer", **outcome)
        ctx.log(step, FaultPhase.END, target=where, probe=self.probe, outcome=outcome)
