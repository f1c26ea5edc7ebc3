"""DeleteRecords up to each partition's high watermark: the log start offset moves past every
record written so far, as retention would (KIP-107). Brokers before KIP-360 drop the producer
state of producers whose last batch lies below it (KAFKA-7190), so their next batch is
UNKNOWN_PRODUCER_ID; Kafka 3.9 keeps it until it expires.

Evidence: the log start offset of each partition moved past 0."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from eoslab.admin import delete_records
from eoslab.fault_events import FaultPhase
from eoslab.nemesis.steps.base import ResolvedStep, ScenarioShape, Step, StepContext


class DeleteRecordsStep(Step):
    kind: Literal["delete-records"]
    partitions: list[int] | None = Field(None, description="which partitions (default: all)")

    def misfit(self, scenario: ScenarioShape) -> str | None:
        beyond = [p for p in self.partitions or () if p >= scenario.partitions]
        if beyond:
            return f"partitions: {beyond}, but the topic has {scenario.partitions} partition(s)"
        return None

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        run = ctx.context
        partitions = self.partitions or list(range(run.partitions))
        starts = delete_records(run.bootstrap, run.topic, partitions)
        moved = all(offset > 0 for offset in starts.values())
        evidence = "log start moved to " + ", ".join(
            f"{offset} on partition {p}" for p, offset in sorted(starts.items())
        )
        ctx.judge(step, moved, evidence, log_start=starts)
        ctx.log(step, FaultPhase.INSTANT, target=run.topic, log_start=starts)
