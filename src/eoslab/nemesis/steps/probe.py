"""A crafted Produce exchange from the protocol-level client (eoslab.probe), played on the run's
topic as a producer session of its own.

Evidence: the broker gave the answer the probe's flow exists to provoke (:data:`eoslab.probe.
scenarios.PROVOKES`: inflight-6's refused retry, seq-jump's refused jump); answers, errors
included, that are not it show a broker the probe never put to the test."""

from __future__ import annotations

from typing import Literal

from eoslab.fault_events import FaultPhase
from eoslab.nemesis.steps.base import PartitionStep, ResolvedStep, StepContext
from eoslab.probe.scenarios import PROVOKES, SCENARIO_PROBES, ProbeName


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
        provokes = PROVOKES[self.probe]
        provoked = provokes.met(answers)
        line += f"; {provokes.what}" if provoked else f"; never provoked: {provokes.what}"
        ctx.judge(step, provoked, line, **outcome)
        ctx.log(step, FaultPhase.END, target=where, probe=self.probe, outcome=outcome)
