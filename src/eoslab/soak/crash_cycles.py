"""Crash cycles: kill -9 the reference broker under the witness producer and restart it on the
same ports and data directory, again and again.

After every restart the partition must still reach past every offset acknowledged before the
kill (the log reloaded intact) and the committing consumer group's committed offset must be at
least its last acknowledged commit (committed offsets never go backwards); at the end every
acknowledged record is read back, none twice within a producer session. librdkafka retries
through each outage (infinite message timeout).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException

from eoslab.probe.requests import list_offsets_request
from eoslab.soak.broker import BrokerProcess
from eoslab.soak.committer import committed_offset, went_back
from eoslab.soak.pacing import KillPacing
from eoslab.soak.transactions import TXN_TOPIC, TxnProducer
from eoslab.soak.witness import WITNESS_TOPIC

ABORT_WAIT_S = 60.0
"""How long the transactional producer may go on after the kills for an abort in the log."""


@dataclass(frozen=True)
class CrashParams:
    cycles: int
    seed: int = 0
    acks_per_cycle: int = 20
    """New acknowledged records to wait for between two kills (progress in every cycle)."""
    witness_rate: float = 300.0
    max_extra_s: float = 0.3
    """After the acks, a further random pause up to this long before the kill (the kill lands
    at varying points of a produce)."""
    fsync: str = "every-batch"
    max_seconds: float = 420.0
    """No kill after this long: the soak is bounded in time as well as in count."""


def _reloaded(broker: BrokerProcess) -> tuple[int, int | None]:
    """(the witness partition's end offset, the group's committed offset) after a restart; the
    offset None when the coordinator kept answering it with an error."""
    with broker.client(30.0) as client:
        response = client.request(list_offsets_request(WITNESS_TOPIC, 0, 0))
        end = int(response.topics[0].partitions[0].offset)
    try:
        return end, committed_offset(broker.bootstrap)
    except KafkaException:
        return end, None


def run_crash_cycles(params: CrashParams, workdir: Path) -> dict[str, object]:
    broker = BrokerProcess(workdir / "crash", fsync=params.fsync)
    broker.workdir.mkdir(parents=True)
    broker.start()
    broker.create_topics((WITNESS_TOPIC, TXN_TOPIC))
    transactions = TxnProducer(broker.bootstrap)
    pacing = KillPacing(
        broker.bootstrap, params.witness_rate, params.acks_per_cycle, params.max_seconds,
        params.max_extra_s, params.seed,
    )  # fmt: skip
    witness, committer = pacing.witness, pacing.committer
    restarts: list[float] = []
    reload_losses = 0
    commits_lost = 0
    commits_unanswered = 0
    commits_after_restarts: list[dict[str, int | None]] = []
    failed_starts: list[str] = []
    transactions.start()
    try:
        for _ in pacing.kills(params.cycles):
            acked_before = witness.highest_acked_offset()
            committed_before = committer.acknowledged()
            broker.kill()
            try:
                restarts.append(broker.start())
            except RuntimeError as failed:
                failed_starts.append(str(failed))
                break
            end_offset, committed = _reloaded(broker)
            reload_losses += end_offset <= acked_before
            if committed is None:
                commits_unanswered += 1
            else:
                commits_lost += went_back(committed_before, committed)
            # both sides of each restart (read None: the restarted coordinator answered errors)
            commits_after_restarts.append({"acknowledged": committed_before, "read": committed})
        pacing.stop()
        transactions.wait_for_an_abort_in_log(ABORT_WAIT_S)
        transactions.stop()
        with broker.client(30.0) as client:
            check = witness.check(client)
        final_commit = committed_offset(broker.bootstrap)
        txn_check = transactions.check()
    finally:
        transactions.stop()
        broker.stop()
    cycles = len(restarts)
    return {
        "parameters": params.__dict__,
        "cycles": cycles,
        "seconds": round(pacing.seconds, 1),
        "seconds_per_cycle": round(pacing.seconds / max(cycles, 1), 2),
        "restart_seconds": {
            "mean": round(sum(restarts) / max(cycles, 1), 2),
            "max": round(max(restarts, default=0.0), 2),
        },
        "stopped_by_time": cycles < params.cycles and not failed_starts,
        "failed_starts": failed_starts,
        "reloads_missing_acked_records": reload_losses,
        "cycles_without_progress": pacing.stalls,
        "witness": check.figures(),
        "transactions": txn_check,
        "consumer_group": {
            **committer.figures(),
            "restarts_with_committed_offset_behind_an_acknowledged_commit": commits_lost,
            "restarts_whose_committed_offset_went_unanswered": commits_unanswered,
            "committed_offsets_across_restarts": commits_after_restarts,
            "committed_offset_at_end": final_commit,
        },
    }
