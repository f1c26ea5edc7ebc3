"""One transactional producer session, as its own OS process:
``python -m eoslab.workload.transactions.session SPEC_JSON``.

The idempotent session of :mod:`eoslab.workload.producer.session`, in transactions: it
initialises its transactional id (fencing any earlier session of the same producer, whose open
transaction the coordinator then aborts), and sends its planned records
``records_per_transaction`` at a time, each transaction committed or, with the seeded
probability ``abort_ratio``, aborted. Before the commit or abort is asked for, the transaction's
records are flushed: an aborted transaction's records are then in the log (for a reader to
wrongly see), and a committed one's are in the log before the commit (for a reader to wrongly
see too early). The history keeps every record's delivery outcome as for any producer; the
transactions journal (:mod:`eoslab.workload.transactions.journal`) how every transaction ended.
A transaction one of whose records failed, or ended with its fate unknown, is cut short: its
abort is asked for, never its commit.

How a commit ends, by librdkafka's answer: retriable errors (a coordinator that died or moved)
are retried, bounded; an error that requires an abort ends the transaction ``aborted`` (its
abort asked for); a fatal error (fenced, ...) ends it ``indeterminate`` and the session, as the
idempotent session ends on a fatal error; a commit with no answer in the bound is
``indeterminate`` too and ends the session (no new transaction may begin while one is open).
An abort that gets no answer is still ``aborted`` when no commit was asked for; after a commit
answered with an error that requires an abort, only a confirmed abort is ``aborted``: a client
may ask for the abort of what its coordinator committed (librdkafka takes an unexpected EndTxn
error, UNKNOWN_SERVER_ERROR, for one that requires an abort; the coordinator then refuses the
abort, INVALID_TXN_STATE), and the transaction is ``indeterminate``.

The zombie (nemesis step ``producer-zombie``): :data:`ARM_FREEZE` arms the session's freeze
point: at its next record sent that is not its transaction's last, it waits (bounded) for a
record of that transaction to be in the log (acknowledged), then stops itself (SIGSTOP), the
transaction open, the rest of its records unsent and its commit or abort not asked for. The
supervisor then starts a newer session of the same producer, which fences this one. Resumed
(SIGCONT), the session is *superseded*: it sends the rest of the transaction it had open (its
late writes) and then asks for its commit or abort; the broker must refuse the first of these as
fenced (a fatal error: the session ends on it, as on any fatal error; a client that recovers
from the refusal of its late writes by itself, as franz-go does before KIP-890's second part,
ends the transaction aborted without one: the errors its late writes got are on its progress
line, ``late_errors``, for the step's evidence). It begins no other
transaction even if nothing fences it (a broker bug): the records it had not begun belong to the
newer session (``handed_over`` on its last progress line), so the producer's share is sent once
whatever the broker does.
"""

from __future__ import annotations

import random
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from eoslab.clock import now_ms
from eoslab.rundir import Outcome, TxnOutcome
from eoslab.workload.drivers.api import halt
from eoslab.workload.producer.plan import PlannedRecord
from eoslab.workload.producer.session import ProducerSession, SessionSpec
from eoslab.workload.spec import TransactionSpec
from eoslab.workload.transactions.journal import (
    ABORT,
    COMMIT,
    TransactionJournal,
    abort_outcome,
)

RETRY_PAUSE_S = 0.2
CALL_TRIES = 4
"""A retriable init, commit or abort is tried this often (each bounded by call_timeout_s)."""
ARM_FREEZE = signal.SIGUSR1
"""Arms the session's freeze point (the zombie of ``producer-zombie``)."""
FREEZE_ACK_WAIT_S = 5.0
"""How long an armed session waits for its transaction's first acknowledgement to freeze."""
FROZEN = "frozen"
"""The ``state`` of the session's progress line written just before it stops itself."""


def call_retried(
    call: Callable[[], object], on_fatal: Callable[[KafkaError], None]
) -> KafkaError | None:
    """``call()`` (a transactional call of librdkafka), retried while it fails retriably
    (CALL_TRIES times, each bounded by the call's own timeout); the error it ended on, None on
    success. A fatal error goes to ``on_fatal`` and ends the tries."""
    error: KafkaError | None = None
    for _ in range(CALL_TRIES):
        try:
            call()
            return None
        except KafkaException as raised:
            error = raised.args[0]
            if not isinstance(error, KafkaError):
                raise
            if error.fatal():
                on_fatal(error)
                return error
            if not error.retriable():
                return error
            print(f"retrying: {error.name()}: {error.str()}", file=sys.stderr, flush=True)
            time.sleep(RETRY_PAUSE_S)
    return error


class TransactionalSession(ProducerSession):
    def __init__(self, spec: SessionSpec) -> None:
        transactions = spec.transactions
        if transactions is None or spec.transactional_id is None:
            raise ValueError("a transactional session needs transactions and a transactional_id")
        spec = spec.model_copy(
            update={
                "config": {
                    **spec.config,
                    "transactional.id": spec.transactional_id,
                    "transaction.timeout.ms": transactions.transaction_timeout_ms,
                }
            }
        )
        super().__init__(spec)
        self.txn: TransactionSpec = transactions
        self.ledger = TransactionJournal(self.run_dir.txn_journal_file(spec.session_id))
        self._choices = random.Random(
            f"transactions:{spec.seed}:{spec.producer}:{spec.session_index}"
        )
        self.state = "running"
        self.freeze_armed = False
        self.superseded = False
        """Frozen at its freeze point and resumed: it ends with the transaction it had open."""
        self.open_txn: dict[str, int] | None = None
        """At the freeze point: the open transaction, its records acknowledged and left to send."""
        self.handed_over = 0
        self.late_errors: Counter[str] = Counter()
        """Superseded: the errors its late writes got (the broker's refusal of its old epoch)."""

    # ---------------------------------------------------------------- librdkafka's calls
    def _call(self, call: Callable[[], object]) -> KafkaError | None:
        """``call()``, retried while it fails retriably (:func:`call_retried`); a fatal error
        is recorded as the session's."""
        return call_retried(call, self._on_fatal)

    # ---------------------------------------------------------------- sending
    def run(self) -> None:
        spec = self.spec
        timeout = self.txn.call_timeout_s
        init_error = self._call(lambda: self.producer.init_transactions(timeout))
        if init_error is not None and self.fatal is None:
            raise KafkaException(init_error)
        self._origin = time.monotonic()
        sent, txn = 0, 0
        while self._live and not self.superseded:
            left = None if spec.records is None else spec.records - sent
            if left is not None and left <= 0:
                break
            if self._past_duration():
                break
            size = self.txn.records_per_transaction
            records = [self.stream.next() for _ in range(size if left is None else min(size, left))]
            sent += len(records)
            self._transaction(txn, records)
            txn += 1
        if spec.records is not None:
            if self.superseded:
                self.handed_over = spec.records - sent
            else:
                self.planned_left = spec.records - sent
        self.ledger.close()
        self._finish()

    def _transaction(self, txn: int, records: list[PlannedRecord]) -> None:
        """Begin, send, flush and commit or abort one transaction; journal each step."""
        intended = ABORT if self._choices.random() < self.txn.abort_ratio else COMMIT
        self.ledger.begin(txn, intended, records, now_ms())
        begun = self._call(self.producer.begin_transaction)
        failed_before, acked_before = self._failed, self.counts["ack"]
        for index, record in enumerate(records):
            if begun is not None or self.stopping or self.fatal is not None:
                self._record(record, now_ms(), Outcome.UNSENT, error="_TRANSACTION_NOT_BEGUN")
                continue
            self._wait_until(self._due(self.counts["sent"]))
            self._send(record)
            self._guarded(lambda: self.producer.poll(0))
            self._warm_up()
            self._housekeeping()
            self._freeze_point(txn, acked_before, len(records) - index - 1)
        if begun is not None:
            self._settle(txn, TxnOutcome.ABORTED, begun.name())
            self.stopping = True
            return
        self._drain(self.spec.flush_timeout_s)
        cut_short = self._failed > failed_before or self.stopping or self.fatal is not None
        if intended == COMMIT and not cut_short:
            self._commit(txn)
        else:
            self._abort(txn, None if intended == ABORT else "_TRANSACTION_CUT_SHORT")

    # ---------------------------------------------------------------- the zombie
    def arm_freeze(self, *_: object) -> None:
        """ARM_FREEZE: freeze at the next freeze point (no I/O in a signal handler)."""
        self.freeze_armed = True
        self.state = "armed"

    def _freeze_point(self, txn: int, acked_before: int, left: int) -> None:
        """If armed, and transaction ``txn`` has records ``left`` to send (the late writes),
        once it has a record acknowledged (in the log: the transaction is open at the
        coordinator; waited for, bounded), stop here (SIGSTOP) until resumed, superseded. Armed
        while the last record is sent or later (the flush, the commit), the session freezes in
        its next transaction."""
        if not self.freeze_armed or left <= 0:
            return
        deadline = time.monotonic() + FREEZE_ACK_WAIT_S
        while self._live and self.counts["ack"] <= acked_before and time.monotonic() < deadline:
            self._guarded(lambda: self.producer.poll(0.05))
        acked = self.counts["ack"] - acked_before
        if acked <= 0 or not self._live:
            return
        self.freeze_armed = False
        self.open_txn = {"txn": txn, "acked": acked, "left": left}
        self.state = FROZEN
        self._progress(done=False)
        halt(signal.SIGSTOP)
        self.state = "superseded"
        self.superseded = True

    def _record(self, record: PlannedRecord, send_ms: int, outcome: Outcome, **fields: Any) -> None:
        super()._record(record, send_ms, outcome, **fields)
        error = fields.get("error")
        if self.superseded and error is not None:
            self.late_errors[error] += 1

    @property
    def _failed(self) -> int:
        """Records that failed or whose fate is unknown: a transaction with one is cut short,
        never committed (Kafka's Java client and librdkafka refuse that commit themselves;
        franz-go's EndTransaction commits what was written, which a late EndTxn can have
        committed already: KAFKA-17754)."""
        return self.counts["fail"] + self.counts["indeterminate"]

    def _progress_line(self, *, done: bool) -> dict[str, Any]:
        return {
            **super()._progress_line(done=done),
            "state": self.state,
            "open_txn": self.open_txn,
            "handed_over": self.handed_over,
            "late_errors": dict(self.late_errors),
        }

    # ---------------------------------------------------------------- ending a transaction
    def _commit(self, txn: int) -> None:
        timeout = self.txn.call_timeout_s
        self.ledger.ending(txn, True, now_ms())
        error = self._call(lambda: self.producer.commit_transaction(timeout))
        if error is None:
            self._settle(txn, TxnOutcome.COMMITTED, None)
        elif error.txn_requires_abort():
            self._abort(txn, error.name(), announced=False)
        else:
            self._settle(txn, TxnOutcome.INDETERMINATE, error.name())
            self.stopping = True

    def _abort(self, txn: int, reason: str | None, *, announced: bool = True) -> None:
        timeout = self.txn.call_timeout_s
        if announced:
            self.ledger.ending(txn, False, now_ms())
        error = self._call(lambda: self.producer.abort_transaction(timeout))
        outcome = abort_outcome(commit_asked=not announced, abort_failed=error is not None)
        self._settle(txn, outcome, reason or (error.name() if error else None))
        if error is not None:
            self.stopping = True

    def _settle(self, txn: int, outcome: TxnOutcome, error: str | None) -> None:
        self.counts[f"txn_{outcome.value}"] += 1
        self.ledger.settled(
            txn,
            outcome,
            error=error,
            settled_ms=now_ms(),
            producer_id=self.producer_id,
            producer_epoch=None if self.producer_id is None else self._epoch,
        )


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m eoslab.workload.transactions.session SPEC_JSON", file=sys.stderr)
        return 2
    session = TransactionalSession(SessionSpec.model_validate_json(argv[0]))
    signal.signal(signal.SIGTERM, session.stop)
    signal.signal(ARM_FREEZE, session.arm_freeze)
    session.ready()
    session.run()
    session.client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
