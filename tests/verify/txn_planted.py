"""Planted transaction histories: a transaction ledger and a reader's reads written by hand into
a run directory, so that every transaction anomaly sits at a known place.

The clean history (:func:`clean`): one transactional id, four transactions over two partitions,
committed, aborted, committed, indeterminate; the reader read every record of the committed and
the indeterminate ones once, after their commit was asked for, and nothing of the aborted one.
Each plant changes one thing and names where the anomaly must be found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from eoslab.rundir import READS_SCHEMA, TRANSACTIONS_SCHEMA, RunDir, TxnOutcome
from eoslab.workload.parts import write_part

RUN_ID = "planted-txn"
SESSION = "s0"
TID = "eos-planted-p0"
Location = tuple[str | None, int | None, str, int, int, int | None]


@dataclass
class PlantedHistory:
    transactions: list[dict[str, Any]] = field(default_factory=list)
    reads: list[dict[str, Any]] = field(default_factory=list)
    next_offset: dict[int, int] = field(default_factory=dict)

    def transaction(
        self, txn: int, outcome: TxnOutcome, records: list[tuple[int, int]], end_ms: int | None
    ) -> None:
        self.transactions.append(
            {
                "run_id": RUN_ID,
                "session_id": SESSION,
                "producer": 0,
                "transactional_id": TID,
                "producer_id": 7,
                "producer_epoch": 0,
                "txn": txn,
                "intended": "abort" if outcome is TxnOutcome.ABORTED else "commit",
                "outcome": outcome.value,
                "error": None,
                "begin_ms": (end_ms or 0) - 100,
                "end_ms": end_ms,
                "settled_ms": None if end_ms is None else end_ms + 10,
                "records": [
                    {"partition": p, "seq": s, "key": f"k{p}", "key_seq": s} for p, s in records
                ],
            }
        )

    def read(self, partition: int, seq: int, read_ms: int) -> int:
        """A read of record (partition, seq) at the partition's next offset; that offset."""
        offset = self.next_offset.get(partition, 0)
        self.next_offset[partition] = offset + 2  # a marker after every record, as it were
        self.reads.append(
            {
                "run_id": RUN_ID,
                "isolation": "read_committed",
                "partition": partition,
                "offset": offset,
                "session_id": SESSION,
                "producer": 0,
                "seq": seq,
                "key": f"k{partition}",
                "key_seq": seq,
                "read_ms": read_ms,
            }
        )
        return offset

    def write(self, root: Path) -> RunDir:
        run = RunDir(root / RUN_ID)
        run.path.mkdir(parents=True)
        run.create_transactions()
        write_part(
            pa.Table.from_pylist(self.transactions, schema=TRANSACTIONS_SCHEMA),
            run.transactions_file(0, SESSION),
        )
        write_part(
            pa.Table.from_pylist(self.reads, schema=READS_SCHEMA), run.reads_file("read_committed")
        )
        return run


TXNS = (
    (0, TxnOutcome.COMMITTED, [(0, 0), (1, 0), (0, 1)], 1000),
    (1, TxnOutcome.ABORTED, [(0, 2), (1, 1)], 2000),
    (2, TxnOutcome.COMMITTED, [(0, 3), (1, 2)], 3000),
    (3, TxnOutcome.INDETERMINATE, [(0, 4), (1, 3)], 4000),
)


def clean(skip: tuple[tuple[int, int], ...] = ()) -> PlantedHistory:
    """The clean history; ``skip``: records (partition, seq) the reader did not read."""
    history = PlantedHistory()
    for txn, outcome, records, end_ms in TXNS:
        history.transaction(txn, outcome, records, end_ms)
    for _txn, outcome, records, end_ms in TXNS:
        if outcome is not TxnOutcome.ABORTED:
            for partition, seq in records:
                if (partition, seq) not in skip:
                    history.read(partition, seq, end_ms + 500)
    return history


def planted(name: str) -> tuple[PlantedHistory, list[Location]]:
    """The clean history with one anomaly planted, and where it must be found."""
    if name == "aborted_read":  # the whole aborted transaction read (a part would be torn too)
        history = clean()
        first, second = history.read(0, 2, 2500), history.read(1, 1, 2500)
        return history, [(TID, 1, SESSION, 0, 2, first), (TID, 1, SESSION, 1, 1, second)]
    if name == "lost_committed":
        return clean(skip=((1, 2),)), [(TID, 2, SESSION, 1, 2, None)]
    if name == "committed_duplicate":
        history = clean()
        offset = history.read(0, 3, 3600)
        return history, [(TID, 2, SESSION, 0, 3, offset)]
    if name == "torn_transaction":
        return clean(skip=((1, 3),)), [(TID, 3, SESSION, 1, 3, None)]
    if name == "uncommitted_read":
        history = PlantedHistory()
        for txn, outcome, records, end_ms in TXNS:
            history.transaction(txn, outcome, records, end_ms)
        early = None
        for txn, outcome, records, end_ms in TXNS:
            if outcome is not TxnOutcome.ABORTED:
                for partition, seq in records:
                    at = history.read(partition, seq, 900 if txn == 0 and seq == 1 else end_ms + 1)
                    early = at if txn == 0 and seq == 1 else early
        return history, [(TID, 0, SESSION, 0, 1, early)]
    raise ValueError(name)


ALSO: dict[str, dict[str, int]] = {
    "lost_committed": {"torn_transaction": 1},
}
"""Other anomalies a plant shows by definition: a committed transaction with a record lost is
torn as well."""
