"""A flow run's history rows, written with the workload's ledger writer into the run directory.

One row per record (the checker joins the history on session, partition and sequence, so a
record has exactly one row), saying what the probe's producer reported to its application:
the **first answer it received** for the record. A success is ``ack`` at the batch's base
offset plus the record's index; an error is ``fail`` with Kafka's error name, as the Java
producer since KIP-360 fails a batch refused with OUT_OF_ORDER_SEQUENCE_NUMBER before it bumps
the epoch. A lost ack is no answer. What the flow resends afterwards (fig. 4's C, D, E and
fig. 5's A under the bumped epoch) shows in the log, not in a second row: fig. 5's A is then
in the log twice, a ``duplicate`` in the probe's session. A record without any answer (the
connection broke) is ``indeterminate``.
"""

from __future__ import annotations

from dataclasses import dataclass

from eoslab.probe.runner import FlowRun
from eoslab.probe.transcript import NONE, Exchange
from eoslab.rundir import Outcome, RunDir
from eoslab.workload.producer.history import HistoryWriter


@dataclass(frozen=True)
class RecordOutcome:
    outcome: Outcome
    send_ms: int
    offset: int | None = None
    error: str | None = None
    ack_ms: int | None = None


def record_outcomes(run: FlowRun) -> dict[tuple[str, int], RecordOutcome]:
    """(tag, index in its group) -> its outcome, for every record the run sent."""
    first_sent: dict[str, Exchange] = {}
    first_answer: dict[str, Exchange] = {}
    for exchange in run.produced():
        assert exchange.tag is not None
        first_sent.setdefault(exchange.tag, exchange)
        if exchange.answered and not exchange.ack_lost:
            first_answer.setdefault(exchange.tag, exchange)
    outcomes = {}
    for tag, sent in first_sent.items():
        answer = first_answer.get(tag)
        for index in range(sent.record_count):
            outcomes[(tag, index)] = _outcome(sent, answer, index)
    return outcomes


def _outcome(sent: Exchange, answer: Exchange | None, index: int) -> RecordOutcome:
    if answer is None:
        return RecordOutcome(Outcome.INDETERMINATE, sent.sent_ms)
    if answer.error == NONE and answer.base_offset is not None:
        return RecordOutcome(
            Outcome.ACK, sent.sent_ms, offset=answer.base_offset + index, ack_ms=answer.answered_ms
        )
    return RecordOutcome(Outcome.FAIL, sent.sent_ms, error=answer.error)


def write_history(run: FlowRun, run_dir: RunDir) -> int:
    """Write the run's rows as the probe's own session; returns how many."""
    writer = HistoryWriter(run_dir, run.run_id, run.session_id, run.producer)
    outcomes = record_outcomes(run)
    for group in run.flow.records:
        for message in run.messages(group.tag):
            outcome = outcomes.get((group.tag, message.key_seq))
            if outcome is None:
                continue  # never sent
            writer.add(
                partition=run.partition,
                seq=message.seq,
                key=message.key,
                key_seq=message.key_seq,
                send_ms=outcome.send_ms,
                outcome=outcome.outcome,
                offset=outcome.offset,
                error=outcome.error,
                ack_ms=outcome.ack_ms,
                latency_ms=None
                if outcome.ack_ms is None
                else float(outcome.ack_ms - outcome.send_ms),
            )
    written = writer.pending
    writer.flush()
    return written
