"""The naive checker's transactions: the transaction anomalies in plain Python, from the
transaction ledger and a reader's reads (pyarrow, dicts and counters).

The same definitions as :mod:`eoslab.verify.transactions.anomalies`, implemented a second time and
independently: the tests hold the Spark derivation against this one, location by location.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow.parquet as pq

from eoslab.rundir import TRANSACTION_ANOMALIES, RunDir, TxnOutcome

Identity = tuple[str, int, int]
"""(session_id, partition, seq): a record of the run."""
Location = tuple[str | None, int | None, str, int, int, int | None]
"""(transactional_id, txn, session_id, partition, seq, offset): where an anomaly is; ``offset``
is where the record was read, None for a record never read."""


def read_ledger(run: RunDir) -> list[dict[str, Any]]:
    """Every transaction of the ledger, as a dict of TRANSACTIONS_SCHEMA's columns."""
    if not any(run.transactions_dir.glob("*.parquet")):
        return []
    return list(pq.read_table(run.transactions_dir).to_pylist())


def aborted_records(transactions: Iterable[Mapping[str, Any]]) -> set[Identity]:
    """Every record of a transaction that ended aborted."""
    return {
        (transaction["session_id"], record["partition"], record["seq"])
        for transaction in transactions
        if transaction["outcome"] == TxnOutcome.ABORTED
        for record in transaction["records"]
    }


def read_reads(run: RunDir, isolation: str) -> list[dict[str, Any]]:
    """The reads of the reader at ``isolation``, as dicts of READS_SCHEMA's columns."""
    path = run.reads_file(isolation)
    return list(pq.read_table(path).to_pylist()) if path.exists() else []


def txn_anomalies(
    transactions: Iterable[Mapping[str, Any]], reads: Iterable[Mapping[str, Any]]
) -> dict[str, list[Location]]:
    """Every transaction anomaly, by name, as the sorted locations of its rows."""
    of_record: dict[Identity, Mapping[str, Any]] = {}
    members: dict[tuple[str, int], list[Identity]] = defaultdict(list)
    for transaction in transactions:
        for record in transaction["records"]:
            identity = (transaction["session_id"], record["partition"], record["seq"])
            of_record[identity] = transaction
            members[(transaction["session_id"], transaction["txn"])].append(identity)
    offsets: dict[Identity, list[tuple[int, int]]] = defaultdict(list)
    for read in reads:
        if read["session_id"] is not None:
            identity = (read["session_id"], read["partition"], read["seq"])
            offsets[identity].append((read["offset"], read["read_ms"]))

    found: dict[str, list[Location]] = {name: [] for name in TRANSACTION_ANOMALIES}

    def at(identity: Identity, offset: int | None) -> Location:
        transaction = of_record.get(identity, {})
        return (transaction.get("transactional_id"), transaction.get("txn"), *identity, offset)

    for identity, seen in offsets.items():
        known = of_record.get(identity)
        outcome = None if known is None else known["outcome"]
        end_ms = None if known is None else known["end_ms"]
        for number, (offset, read_ms) in enumerate(sorted(seen)):
            if outcome == TxnOutcome.ABORTED:
                found["aborted_read"].append(at(identity, offset))
            elif end_ms is None or read_ms < end_ms:
                found["uncommitted_read"].append(at(identity, offset))
            if number > 0:
                found["committed_duplicate"].append(at(identity, offset))
    for records in members.values():
        unread = [identity for identity in records if identity not in offsets]
        if 0 < len(unread) < len(records):
            found["torn_transaction"] += [at(identity, None) for identity in unread]
        for identity in unread:
            if of_record[identity]["outcome"] == TxnOutcome.COMMITTED:
                found["lost_committed"].append(at(identity, None))
    return {name: sorted(rows, key=repr) for name, rows in found.items()}


def count_txn_anomalies(
    transactions: Iterable[Mapping[str, Any]], reads: Iterable[Mapping[str, Any]]
) -> dict[str, int]:
    """Every transaction anomaly's count."""
    return {name: len(rows) for name, rows in txn_anomalies(transactions, reads).items()}
