"""A zombie transactional producer (issue 21): the producer's running session freezes itself
(SIGSTOP) inside an open transaction that already has a record in the log, before the
transaction's commit or abort is asked for; a new session of the same producer starts beside it
(the same transactional.id: its init_transactions bumps the epoch, fencing the frozen session,
and the coordinator aborts the frozen session's open transaction); after `duration` the frozen
session is resumed (SIGCONT). It sends the rest of its open transaction (late writes), then
would ask for its commit or abort: the broker must refuse the first of these as fenced (on Kafka
3.9 the AddPartitionsToTxn of a late write, PRODUCER_FENCED; on Kafka 4 and the reference broker
a late write's Produce, INVALID_PRODUCER_EPOCH), and the session ends on the fatal error
librdkafka raises for either (``_FENCED``, see :data:`FENCING_ERRORS`).

The records: the new session takes over every record the zombie had not yet put in a
transaction; the zombie keeps only the transaction it had open (its late writes), and begins no
other even when nothing fences it, so the producer's share is sent once whatever the broker does
(:mod:`eoslab.workload.transactions.session`).

Evidence: the session froze with a transaction open (records acknowledged, no commit asked
for), the new session initialised the same producer id at a newer epoch, and the resumed zombie
ended on a fencing fatal error — or, for a client that recovers from a refusal of its epoch by
itself (franz-go before KIP-890's second part: INVALID_PRODUCER_EPOCH on a late write fails its
producer id, its abort then returns at once and its next write would re-initialise at the old
epoch, which the coordinator refuses PRODUCER_FENCED: the probe flow ``txn-fence`` shows it on
every target), its late writes were refused with a fencing error and its transaction ended
aborted. A zombie that ended otherwise (its commit went through, or it ended on another error,
or nothing refused it) was not fenced, and the step did not take effect."""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

from eoslab.fault_events import FaultPhase
from eoslab.nemesis.steps.base import ProducerStep, ResolvedStep, ScenarioShape, StepContext

FENCING_ERRORS = frozenset({"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"})
"""The errors that say a producer was fenced: librdkafka raises its own ``_FENCED`` for the
broker's PRODUCER_FENCED and, in a transactional producer, INVALID_PRODUCER_EPOCH."""
ZOMBIE_END_TIMEOUT_S = 60.0
"""How long the resumed zombie may take to end (its calls are bounded by call_timeout_s)."""


class ProducerZombieStep(ProducerStep):
    kind: Literal["producer-zombie"]
    needs_end: ClassVar[str | None] = "a producer zombie"

    def misfit(self, scenario: ScenarioShape) -> str | None:
        if not scenario.transactional:
            return "kind: producer-zombie needs transactional producers (workload.transactions)"
        return super().misfit(scenario)

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        workload = ctx.workload()
        zombie, frozen = workload.freeze_mid_transaction(self.producer)

        def resume() -> None:
            """SIGCONT (also for a session that froze only after the arm timed out)."""
            workload.resume(zombie.session_id)

        if frozen is None:
            ctx.broke(step, f"resume {self.who}", resume)
            ctx.judge(
                step,
                False,
                f"{self.who} session {zombie.session_id[:8]} never froze in an open transaction "
                "with a record in the log (it ended first, or none was acknowledged in time)",
                session_id=zombie.session_id,
            )
            ctx.log(step, FaultPhase.START, target=self.who, session_id=zombie.session_id)
            return
        successor = workload.take_over(self.producer)
        open_txn: dict[str, int] = frozen["open_txn"]
        ctx.broke(
            step,
            f"resume {self.who} session {zombie.session_id[:8]}",
            resume,
            zombie=zombie.session_id,
            successor=successor.session_id,
            frozen=frozen,
            frozen_at=time.monotonic(),
        )
        ctx.judge(
            step,
            False,
            f"{self.who} session {zombie.session_id[:8]} frozen in transaction "
            f"{open_txn['txn']}; session {successor.session_id[:8]} started; not resumed yet",
            session_id=zombie.session_id,
            successor=successor.session_id,
            open_txn=open_txn,
            zombie_producer=_producer(frozen),
        )
        ctx.log(
            step,
            FaultPhase.START,
            target=self.who,
            signal="SIGSTOP",
            session_id=zombie.session_id,
            successor=successor.session_id,
            open_txn=open_txn,
        )

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        memo = ctx.memo(step)
        ctx.repair(step)
        if "frozen" not in memo:  # judged at the start: it never froze
            return
        workload = ctx.workload()
        frozen: dict[str, Any] = memo["frozen"]
        frozen_s = round(time.monotonic() - memo["frozen_at"], 3)
        ended = workload.await_end(memo["zombie"], ZOMBIE_END_TIMEOUT_S)
        zombie_ids = _producer(frozen)
        successor_ids = _producer(workload.progress(memo["successor"]))
        txn = int(frozen["open_txn"]["txn"])
        settled = workload.transaction_settled(memo["zombie"], txn) or {}
        counts = workload.progress(memo["zombie"])
        newer = _newer(zombie_ids, successor_ids)
        fatal = None if ended is None else ended.fatal
        refused = sorted(FENCING_ERRORS.intersection(counts.get("late_errors") or {}))
        recovered = fatal is None and bool(refused) and settled.get("outcome") == "aborted"
        fenced = fatal in FENCING_ERRORS or recovered
        if ended is None:
            why = f"the resumed zombie did not end within {ZOMBIE_END_TIMEOUT_S:g} s"
        elif not fenced:
            why = f"the resumed zombie ended on {fatal or 'no fatal error'}, not fenced"
        elif not newer:
            why = (
                f"the new session's producer (id, epoch) {successor_ids} is not the zombie's "
                f"{zombie_ids} at a newer epoch"
            )
        else:
            why = "fenced"
        evidence = (
            f"{self.who} session {memo['zombie'][:8]} frozen {frozen_s:.1f} s in transaction "
            f"{txn} (producer {zombie_ids}); session {memo['successor'][:8]} initialised "
            f"{successor_ids}; resumed, "
            + (
                f"its late writes were refused ({', '.join(refused)}) and its client aborted "
                "without a fatal error (it re-initialises at its old epoch on its next write)"
                if recovered
                else f"the zombie ended on {fatal}, its transaction "
                f"{settled.get('outcome', 'unsettled')}"
            )
        )
        ctx.judge(
            step,
            newer and fenced,
            evidence if newer and fenced else f"{evidence}: {why}",
            frozen_s=frozen_s,
            successor_producer=successor_ids,
            zombie_fatal=fatal,
            zombie_fatal_reason=None if ended is None else ended.fatal_reason,
            zombie_txn_outcome=settled.get("outcome"),
            zombie_txn_error=settled.get("error"),
            zombie_late_errors=counts.get("late_errors") or {},
            zombie_records={o: counts.get(o, 0) for o in ("sent", "ack", "fail", "indeterminate")},
        )
        ctx.log(
            step,
            FaultPhase.END,
            target=self.who,
            signal="SIGCONT",
            frozen_s=frozen_s,
            zombie_fatal=fatal,
            zombie_txn_outcome=settled.get("outcome"),
        )


ProducerIds = tuple[int | None, int | None]


def _producer(progress: dict[str, Any]) -> ProducerIds:
    """A session's producer id and epoch, from its progress line."""
    return progress.get("producer_id"), progress.get("producer_epoch")


def _newer(old: ProducerIds, new: ProducerIds) -> bool:
    """Whether ``new`` is the producer id of ``old`` at a newer epoch (a fence of it)."""
    (old_id, old_epoch), (new_id, new_epoch) = old, new
    if old_id is None or old_epoch is None or new_epoch is None:
        return False
    return new_id == old_id and new_epoch > old_epoch
