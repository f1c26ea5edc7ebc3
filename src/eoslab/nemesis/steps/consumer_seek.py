"""A consumer moves its own position, right after an effect, without a rebalance: back to its
partition's log start (``to: beginning``) or forward past the next records (``to: forward``).
What an application's seek does; the negative controls of the poll checks (a seek back is a
nonmonotonic poll, and the commit after it an offset regression; a seek forward is a poll skip,
and the commit after it leaves the skipped records unprocessed).

Evidence: the consumer reports the seek it made (the partition, the next offset it would have
read, where it went): back to a lower offset, or forward over at least one record of the log.
A seek that went nowhere (a partition already at its log start, a log that never held the
records to skip) did not take effect."""

from __future__ import annotations

from typing import Literal

from eoslab.fault_events import FaultPhase
from eoslab.nemesis.steps.base import ConsumerStep, ResolvedStep, StepContext


class ConsumerSeekStep(ConsumerStep):
    kind: Literal["consumer-seek"]
    to: Literal["beginning", "forward"]

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        back = self.to == "beginning"
        sought = ctx.consumers().seek_after_next_effect(self.consumer, back=back)
        if sought is None:
            took_effect, evidence = False, f"{self.who} applied no effect to seek after"
        else:
            partition, start, end = sought["partition"], sought["from"], sought["to"]
            moved = end < start if back else end > start
            how = f"back to {end} (its log start)" if back else f"forward to {end}"
            evidence = f"{self.who} sought partition {partition} from {start} {how}" + (
                "" if moved else ": it did not move"
            )
            took_effect = moved
        ctx.judge(step, took_effect, evidence, sought=sought)
        ctx.log(step, FaultPhase.INSTANT, target=self.who, to=self.to, sought=sought)
