"""The copy journal: every batch a copier session copied, the input records it consumed, the
offsets it committed with them and how its transaction ended, in Parquet.

A copier session journals as a transactional producer session does
(:class:`~eoslab.workload.transactions.journal.TransactionJournal`: one JSON line per event, in one
``write()``): ``begin`` with the batch's inputs and offsets before its first copy is produced,
``ending`` before the commit is asked for (of the transaction, or of the offsets for the
at-least-once copier), ``settled`` once its answer came. Whenever the session's process ends,
the supervisor seals the journal into ``copier/w<worker>-<session>.parquet`` (COPIER_SCHEMA).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from eoslab.rundir import COPIER_SCHEMA, RunDir
from eoslab.workload.parts import write_part
from eoslab.workload.transactions.journal import TransactionJournal, read_events, settlement_columns

CopyInput = tuple[int, int, str | None, int | None]
"""(partition, offset, session_id, seq) of one input record (the identity null if foreign)."""


class CopyJournal(TransactionJournal):
    def begin_copy(
        self, txn: int, inputs: Sequence[CopyInput], offsets: Mapping[int, int], begin_ms: int
    ) -> None:
        self._line(
            {
                "event": "begin",
                "txn": txn,
                "begin_ms": begin_ms,
                "inputs": [list(i) for i in inputs],
                "offsets": sorted(offsets.items()),
            }
        )


def copier_rows(
    events: list[dict[str, Any]],
    run_id: str,
    worker: int,
    session_id: str,
    transactional_id: str | None,
) -> dict[str, list[Any]]:
    """The copier ledger's columns (COPIER_SCHEMA) for one session's journal events."""
    return settlement_columns(
        events,
        COPIER_SCHEMA,
        lambda settled: {
            "run_id": run_id,
            "worker": worker,
            "session_id": session_id,
            "transactional_id": transactional_id,
            "inputs": [
                {"partition": p, "offset": o, "session_id": s, "seq": q}
                for p, o, s, q in settled.begin["inputs"]
            ],
            "offsets": [{"partition": p, "offset": o} for p, o in settled.begin["offsets"]],
        },
    )


def seal_copier(
    run_dir: RunDir, run_id: str, worker: int, session_id: str, transactional_id: str | None
) -> int:
    """Write the session's copier ledger from its journal; how many batches it holds."""
    events = read_events(run_dir.copier_journal_file(session_id))
    columns = copier_rows(events, run_id, worker, session_id, transactional_id)
    write_part(
        pa.Table.from_pydict(columns, schema=COPIER_SCHEMA),
        run_dir.copier_file(worker, session_id),
    )
    return len(columns["txn"])
