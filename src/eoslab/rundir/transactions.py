"""Transactions (issue 21): the transaction ledger, the readers' reads, run.json's part.

Part of the run directory's contract: :mod:`eoslab.rundir`."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, get_args

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

Isolation = Literal["read_committed", "read_uncommitted"]
"""A consumer's ``isolation.level``."""
ISOLATIONS: tuple[Isolation, ...] = get_args(Isolation)


class TxnOutcome(StrEnum):
    """How a transaction ended, as its producer knows it (see the module docstring)."""

    COMMITTED = "committed"
    ABORTED = "aborted"
    INDETERMINATE = "indeterminate"


TXN_RECORD = pa.struct(
    [
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("key_seq", pa.int64(), nullable=False),
    ]
)
"""One record of a transaction: with the row's ``session_id`` the record's identity."""

TRANSACTIONS_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("producer", pa.int32(), nullable=False),
        pa.field("transactional_id", pa.string(), nullable=False),
        pa.field("producer_id", pa.int64()),
        pa.field("producer_epoch", pa.int32()),
        pa.field("txn", pa.int64(), nullable=False),
        pa.field("intended", pa.string(), nullable=False),
        pa.field("outcome", pa.string(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("begin_ms", pa.int64(), nullable=False),
        pa.field("end_ms", pa.int64()),
        pa.field("settled_ms", pa.int64()),
        pa.field("records", pa.list_(TXN_RECORD), nullable=False),
    ]
)
"""The transaction ledger: ``txn`` numbers a session's transactions (0, 1, ...); ``producer_id``
and ``producer_epoch`` are what librdkafka's statistics last showed before the transaction
settled (null before the first sample); ``end_ms`` is when the commit or abort was asked for
(null if it never was), ``settled_ms`` when its answer came (null without one); ``error`` is
librdkafka's name of the error the transaction ended on (null when it ended as intended)."""

READS_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("isolation", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("session_id", pa.string()),
        pa.field("producer", pa.int32()),
        pa.field("seq", pa.int64()),
        pa.field("key", pa.string()),
        pa.field("key_seq", pa.int64()),
        pa.field("read_ms", pa.int64(), nullable=False),
    ]
)
"""A reader's records in the order it read them: the message columns are null for a record that
is not this run's."""


class ReadInfo(BaseModel):
    """One reader's account: how much it read and whether it reached the end of every
    partition (a read that did not is incomplete, and the run invalid)."""

    model_config = ConfigDict(extra="forbid")

    isolation: Isolation
    records: int = 0
    complete: bool = False
    end_offsets: dict[int, int] = Field(default_factory=dict)
    """Where it read up to: the last stable offsets (read_committed) or the high watermarks."""


class TransactionsInfo(BaseModel):
    """``run.json``'s ``transactions``: the transactional producers' settings and the readers."""

    model_config = ConfigDict(extra="forbid")

    records_per_transaction: int
    abort_ratio: float
    transaction_timeout_ms: int
    isolation: Isolation
    """The isolation level of the consumer under test: the read the checks run on."""
    transactional_ids: list[str] = Field(default_factory=list)
    reads: list[ReadInfo] = Field(default_factory=list)
    held_at_end: dict[int, list[int]] = Field(default_factory=dict)
    """Partitions a transaction still held when the run ended (transaction.timeout.ms and a
    margin after the workload: no coordinator would end it any more), each with its [last
    stable offset, high watermark]: the check :data:`HANGING_TRANSACTIONS`."""
