"""kill -9 a consumer between an effect and its commit (seed 004): the record's effect is in
the sink, its offset is not committed, so it is delivered again. A new session of the consumer
starts after `duration`, at once if unset.

In auto-commit (004 fig. 3) the client commits what it handed out, on its timer: the consumer is
killed in the middle of a batch once that commit covered the records of the batch it had not
processed yet, so nobody ever processes them.

Evidence: the consumer killed itself at its crash point, right after an effect (armed by a
signal); one that applied no effect after arming (it ended, or was killed from outside) did
not crash where seed 004 puts it, and the step did not take effect. In auto-commit, besides:
records of its batch were left unprocessed at the crash, and its last progress line shows the
auto-commit past every record handed out."""

from __future__ import annotations

from typing import Any, Literal

from eoslab.nemesis.steps.base import ConsumerStep, ResolvedStep, RestartingStep, StepContext


class ConsumerCrashStep(ConsumerStep, RestartingStep):
    kind: Literal["consumer-crash"]

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        consumers = ctx.consumers()
        generation = consumers.generation()
        crashed, between = consumers.crash_after_next_effect(self.consumer)
        observed: dict[str, object] = {}
        if not between:
            took_effect = False
            evidence = (
                f"{self.who} applied no effect after the crash was armed: not killed "
                "between an effect and its commit"
            )
        elif consumers.auto_commit:
            at_crash = consumers.progress(self.consumer)
            left = int(at_crash.get("left_in_batch") or 0)
            behind = _not_committed_past(at_crash)
            took_effect = left > 0 and not behind
            evidence = f"{self.who} killed with {left} records of its batch unprocessed" + (
                f", the auto-commit past every record handed out (generation {generation})"
                if not behind
                else f": the auto-commit had not committed past partitions {behind}"
            )
            observed = {"left_in_batch": left, "not_committed_past": behind}
        else:
            took_effect = True
            evidence = (
                f"{self.who} killed between an effect and its commit (generation {generation})"
            )
        ctx.judge(
            step,
            took_effect,
            evidence,
            session_id=crashed.session_id,
            generation=generation,
            **observed,
        )
        self._killed(
            ctx,
            step,
            session_id=crashed.session_id,
            between_effect_and_commit=between,
            generation=generation,
        )

    def _new_session(self, ctx: StepContext) -> str:
        return ctx.consumers().restart(self.consumer).session_id


def _not_committed_past(progress: dict[str, Any]) -> list[int]:
    """The partitions whose handed-out records the consumer's commits had not all covered, by
    its progress line (``received``: past the last record handed out; ``committed``)."""
    received: dict[str, int] = progress.get("received") or {}
    committed: dict[str, int] = progress.get("committed") or {}
    return sorted(
        int(p) for p, offset in received.items() if int(committed.get(p, -1)) < int(offset)
    )
