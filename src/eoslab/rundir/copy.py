"""The copy stage (consume-transform-produce): the copier ledger's schema, run.json's part.

Part of the run directory's contract: :mod:`eoslab.rundir`."""

from __future__ import annotations

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

COPY_INPUT = pa.struct(
    [
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("session_id", pa.string()),
        pa.field("seq", pa.int64()),
    ]
)
"""One input record a copier transaction consumed and copied: its place in the input topic and
(null for a record that is not the run's) its identity."""
COPY_OFFSET = pa.struct(
    [
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
    ]
)

COPIER_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("worker", pa.int32(), nullable=False),
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("transactional_id", pa.string()),
        pa.field("producer_id", pa.int64()),
        pa.field("producer_epoch", pa.int32()),
        pa.field("txn", pa.int64(), nullable=False),
        pa.field("outcome", pa.string(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("begin_ms", pa.int64(), nullable=False),
        pa.field("end_ms", pa.int64()),
        pa.field("settled_ms", pa.int64()),
        pa.field("inputs", pa.list_(COPY_INPUT), nullable=False),
        pa.field("offsets", pa.list_(COPY_OFFSET), nullable=False),
    ]
)
"""The copier ledger: one row per batch a copier session copied (``txn`` numbers them, 0, 1,
...): the input records it consumed (``inputs``; each copied to the output topic, key kept, the
value naming the input's place: :func:`eoslab.message.encode_copy`), the consumer offsets it
committed with them (``offsets``: per partition, the next input to read), and how it ended
(``outcome``, as a transaction's, :class:`TxnOutcome`). ``transactional_id``, ``producer_id``
and ``producer_epoch`` are null for an at-least-once copier (copies produced, then offsets
committed apart: ``committed`` means its offset commit succeeded)."""


class CopierSessionInfo(BaseModel):
    """One copier worker process lifetime: a new session (a new group member) on every start."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    worker: int
    started_ms: int
    ended_ms: int | None = None
    crashed: bool = False
    """Killed itself (-9): at its seeded crash point (between producing copies and committing),
    or because a librdkafka call hung (``hung_in``)."""
    hung_in: str | None = None
    """The librdkafka call that did not return within its timeout (the watchdog killed the
    session: an observation of the client, not a failure of the run)."""
    unconfirmed_commit: str | None = None
    """The error of a commit whose outcome the client could not confirm: the session ended on
    it (its transaction ``indeterminate`` in the ledger) and a new session replaced it."""


class CopyInfo(BaseModel):
    """``run.json``'s ``copy``: the copier stage (consume-transform-produce)."""

    model_config = ConfigDict(extra="forbid")

    output_topic: str
    group: str
    workers: int
    records_per_transaction: int
    transactional: bool
    """False: the at-least-once copier (the negative control)."""
    transactional_ids: list[str] = Field(default_factory=list)
    sessions: list[CopierSessionInfo] = Field(default_factory=list)
    committed_offsets: dict[int, int] = Field(default_factory=dict)
    """The copier group's committed offset per input partition at the end, as its coordinator
    answered (a partition never committed is left out)."""
