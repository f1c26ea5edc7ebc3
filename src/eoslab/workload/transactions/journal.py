"""The transactions journal: every transaction a transactional producer session began, its records
and how it ended, in Parquet, written so that a kill -9 loses nothing that mattered.

A session journals each transaction as it goes, one JSON line per event in one ``write()``
(:class:`TransactionJournal`): ``begin`` with the transaction's records before the first of them
is sent, ``ending`` before the commit or abort is asked for, ``settled`` once its answer came.
The lines survive a kill -9 in the page cache. Whenever the session's process ends, however it
ends, the supervisor seals the journal into ``transactions/p<producer>-<session>.parquet``
(:func:`seal_transactions`); a transaction without a ``settled`` line gets its outcome from how
far it got (see :func:`unsettled_outcome`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from eoslab.rundir import TRANSACTIONS_SCHEMA, RunDir, TxnOutcome
from eoslab.workload.parts import write_part
from eoslab.workload.producer.outcomes import PRODUCER_KILLED
from eoslab.workload.producer.plan import PlannedRecord

COMMIT = "commit"
ABORT = "abort"


class TransactionJournal:
    """Append-only, unbuffered: each line is in the kernel before what it announces happens."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _line(self, event: dict[str, Any]) -> None:
        os.write(self._fd, (json.dumps(event, separators=(",", ":")) + "\n").encode())

    def begin(
        self, txn: int, intended: str, records: Sequence[PlannedRecord], begin_ms: int
    ) -> None:
        self._line(
            {
                "event": "begin",
                "txn": txn,
                "intended": intended,
                "begin_ms": begin_ms,
                "records": [[r.partition, r.seq, r.key, r.key_seq] for r in records],
            }
        )

    def ending(self, txn: int, commit: bool, end_ms: int) -> None:
        """The commit (``commit``) or the abort is about to be asked for."""
        self._line({"event": "ending", "txn": txn, "commit": commit, "end_ms": end_ms})

    def settled(
        self,
        txn: int,
        outcome: TxnOutcome,
        *,
        error: str | None,
        settled_ms: int,
        producer_id: int | None,
        producer_epoch: int | None,
    ) -> None:
        self._line(
            {
                "event": "settled",
                "txn": txn,
                "outcome": outcome.value,
                "error": error,
                "settled_ms": settled_ms,
                "producer_id": producer_id,
                "producer_epoch": producer_epoch,
            }
        )

    def close(self) -> None:
        os.close(self._fd)


def read_events(path: Path) -> list[dict[str, Any]]:
    """The journal's events; a torn last line (killed mid-write) never happened: skipped."""
    if not path.exists():
        return []
    events = []
    for line in path.read_bytes().split(b"\n"):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and "event" in event and "txn" in event:
            events.append(event)
    return events


def open_transaction(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The session's last transaction if it was begun and neither its commit nor its abort was
    asked for (what a kill -9 leaves open): ``txn``, ``records``; else None."""
    begins = [e for e in events if e["event"] == "begin"]
    if not begins:
        return None
    last = begins[-1]
    if any(e["event"] in ("ending", "settled") and e["txn"] == last["txn"] for e in events):
        return None
    return {"txn": int(last["txn"]), "records": len(last["records"])}


def unsettled_transaction(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The session's last transaction if it was begun and is not settled yet (open, or its
    commit or abort asked for but not answered: a transaction the coordinator holds):
    ``txn``, ``records``, ``ending``; else None."""
    begins = [e for e in events if e["event"] == "begin"]
    if not begins:
        return None
    last = int(begins[-1]["txn"])
    if any(e["event"] == "settled" and e["txn"] == last for e in events):
        return None
    ending = any(e["event"] == "ending" and e["txn"] == last for e in events)
    return {"txn": last, "records": len(begins[-1]["records"]), "ending": ending}


def begun_records(events: list[dict[str, Any]]) -> int:
    """How many records the transactions a session began hold (from its journal's events)."""
    return sum(len(event["records"]) for event in events if event["event"] == "begin")


def unsettled_outcome(ending: dict[str, Any] | None) -> TxnOutcome:
    """How a transaction without an answer ended: ``indeterminate`` once its commit was asked
    for (the coordinator may have committed it); ``aborted`` otherwise (no commit was ever asked
    for, so the coordinator can only abort it: on the next InitProducerId of its transactional
    id, or when it times out)."""
    if ending is not None and ending.get("commit"):
        return TxnOutcome.INDETERMINATE
    return TxnOutcome.ABORTED


def abort_outcome(*, commit_asked: bool, abort_failed: bool) -> TxnOutcome:
    """How an abort the session asked for settles its transaction: ``aborted``, unless its
    commit had been asked for first and the abort failed (the coordinator may have committed
    it: ``indeterminate``, as :func:`unsettled_outcome` says of a transaction without an
    answer)."""
    if commit_asked and abort_failed:
        return TxnOutcome.INDETERMINATE
    return TxnOutcome.ABORTED


@dataclass(frozen=True)
class Settlement:
    """One transaction of a journal: its ``begin`` and ``ending`` events and how it ended (a
    transaction without a ``settled`` event: :func:`unsettled_outcome`, the session killed);
    the producer id and epoch the journal last named, at its settlement or before."""

    txn: int
    begin: dict[str, Any]
    ending: dict[str, Any] | None
    outcome: TxnOutcome
    error: str | None
    settled_ms: int | None
    producer_id: int | None
    producer_epoch: int | None

    def columns(self) -> dict[str, Any]:
        """The columns every ledger of transactions has (TRANSACTIONS_SCHEMA, COPIER_SCHEMA)."""
        return {
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "txn": self.txn,
            "outcome": self.outcome.value,
            "error": self.error,
            "begin_ms": self.begin["begin_ms"],
            "end_ms": None if self.ending is None else int(self.ending["end_ms"]),
            "settled_ms": self.settled_ms,
        }


def settlements(events: list[dict[str, Any]]) -> list[Settlement]:
    """Every transaction the journal's events began, in order, with how it ended."""
    begins: dict[int, dict[str, Any]] = {}
    endings: dict[int, dict[str, Any]] = {}
    settles: dict[int, dict[str, Any]] = {}
    for event in events:
        chosen = {"begin": begins, "ending": endings, "settled": settles}.get(event["event"])
        if chosen is not None:
            chosen[int(event["txn"])] = event
    found = []
    last_ids: tuple[int | None, int | None] = (None, None)
    for txn in sorted(begins):
        ending, settled = endings.get(txn), settles.get(txn)
        if settled is not None:
            outcome = TxnOutcome(settled["outcome"])
            error, settled_ms = settled.get("error"), settled.get("settled_ms")
            last_ids = (settled.get("producer_id"), settled.get("producer_epoch"))
        else:
            outcome, error, settled_ms = unsettled_outcome(ending), PRODUCER_KILLED, None
        found.append(Settlement(txn, begins[txn], ending, outcome, error, settled_ms, *last_ids))
    return found


def settlement_columns(
    events: list[dict[str, Any]],
    schema: pa.Schema,
    row_of: Callable[[Settlement], dict[str, Any]],
) -> dict[str, list[Any]]:
    """A ledger's columns (of ``schema``) for one session's journal events: a transaction's
    own columns (:meth:`Settlement.columns`) and what ``row_of`` makes of it."""
    columns: dict[str, list[Any]] = {name: [] for name in schema.names}
    for settled in settlements(events):
        row = {**settled.columns(), **row_of(settled)}
        for name in schema.names:
            columns[name].append(row[name])
    return columns


def ledger_rows(
    events: list[dict[str, Any]], run_id: str, session_id: str, producer: int, transactional_id: str
) -> dict[str, list[Any]]:
    """The ledger's columns (TRANSACTIONS_SCHEMA) for one session's journal events."""
    return settlement_columns(
        events,
        TRANSACTIONS_SCHEMA,
        lambda settled: {
            "run_id": run_id,
            "session_id": session_id,
            "producer": producer,
            "transactional_id": transactional_id,
            "intended": settled.begin["intended"],
            "records": [
                {"partition": p, "seq": seq, "key": key, "key_seq": key_seq}
                for p, seq, key, key_seq in settled.begin["records"]
            ],
        },
    )


def seal_transactions(
    run_dir: RunDir, run_id: str, session_id: str, producer: int, transactional_id: str
) -> int:
    """Write the session's transaction ledger from its journal (replacing an earlier seal);
    returns how many transactions it holds."""
    events = read_events(run_dir.txn_journal_file(session_id))
    columns = ledger_rows(events, run_id, session_id, producer, transactional_id)
    write_part(
        pa.Table.from_pydict(columns, schema=TRANSACTIONS_SCHEMA),
        run_dir.transactions_file(producer, session_id),
    )
    return len(columns["txn"])
