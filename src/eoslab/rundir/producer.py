"""The producer half's part of a run directory: the history's outcomes and schema, and run.json's producer sessions.

Part of the run directory's contract: :mod:`eoslab.rundir`."""

from __future__ import annotations

from enum import StrEnum

import pyarrow as pa
from pydantic import BaseModel, ConfigDict


class Outcome(StrEnum):
    """A record's final outcome in the history (see the module docstring)."""

    ACK = "ack"
    FAIL = "fail"
    INDETERMINATE = "indeterminate"
    UNSENT = "unsent"
    DELETED = "deleted"
    ABORTED = "aborted"


HISTORY_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("producer", pa.int32(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("key_seq", pa.int64(), nullable=False),
        pa.field("send_ms", pa.int64(), nullable=False),
        pa.field("outcome", pa.string(), nullable=False),
        pa.field("offset", pa.int64()),
        pa.field("error", pa.string()),
        pa.field("ack_ms", pa.int64()),
        pa.field("latency_ms", pa.float64()),
    ]
)
"""The history columns: ``offset`` is null unless ack; ``error`` (librdkafka's error name)
is null on ack; ``ack_ms`` and ``latency_ms`` are null unless a delivery report arrived."""


class SessionInfo(BaseModel):
    """One producer process lifetime: a new session (and a new PID) on every (re)start."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    producer: int
    started_ms: int
    ended_ms: int | None = None
    fatal: str | None = None
    """librdkafka's name of the fatal error the session ended on (an observation, not a
    crash: the session records its outcomes and ends cleanly), e.g. OUT_OF_ORDER_SEQUENCE_NUMBER;
    None when it ended otherwise."""
    fatal_reason: str | None = None
    unsent: int = 0
    """Records of the session's share it never handed to the client (it ended first)."""
    epoch_bumps: int = 0
    """How often the session's producer epoch went up (librdkafka's statistics: a KIP-360
    bump after UNKNOWN_PRODUCER_ID or OUT_OF_ORDER_SEQUENCE_NUMBER, a drained bump after a
    timed-out message)."""
