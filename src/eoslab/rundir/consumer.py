"""The consumer half (seed 004): handler modes, the consumption ledger's schemas, run.json's part.

Part of the run directory's contract: :mod:`eoslab.rundir`."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, get_args

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

HandlerMode = Literal["auto-commit", "commit-after", "idempotent", "dedup-table"]
"""How a consumer applies records and commits offsets (ARCHITECTURE.md, "The consumer half")."""
HANDLER_MODES: tuple[HandlerMode, ...] = get_args(HandlerMode)
GroupProtocol = Literal["classic", "consumer"]
"""The consumer group protocol (librdkafka's ``group.protocol``): ``classic`` (JoinGroup,
SyncGroup, Heartbeat: the group leader assigns) or ``consumer``, KIP-848's
(ConsumerGroupHeartbeat: the broker assigns, a member epoch per member). The lab's Kafka 4 speaks
both; Kafka 3.9 and the reference broker the classic one only."""
GROUP_PROTOCOLS: tuple[GroupProtocol, ...] = get_args(GroupProtocol)


def handler_mode(name: str | None) -> HandlerMode | None:
    """``name`` as a handler mode (None stays None); ValueError naming the choices otherwise."""
    if name is None:
        return None
    for mode in HANDLER_MODES:
        if name == mode:
            return mode
    raise ValueError(f"unknown handler mode {name!r}; choose one of: {', '.join(HANDLER_MODES)}")


def group_protocol_of(name: str | None) -> GroupProtocol | None:
    """``name`` as a group protocol (None or empty: None); ValueError naming the choices."""
    if not name:
        return None
    for protocol in GROUP_PROTOCOLS:
        if name == protocol:
            return protocol
    raise ValueError(
        f"unknown group protocol {name!r}; choose one of: {', '.join(GROUP_PROTOCOLS)}"
    )


class Effect(StrEnum):
    """What processing a record did to the sink (see the module docstring)."""

    APPLIED = "applied"
    DUPLICATE = "duplicate"
    FOREIGN = "foreign"


class CommitTrigger(StrEnum):
    """Why a consumer committed (see the module docstring)."""

    EVERY = "every"
    IDLE = "idle"
    REVOKE = "revoke"
    CLOSE = "close"
    AUTO = "auto"
    WAKE = "wake"
    """A session woken from its freeze commits what it processed before it froze, at once: the
    zombie's commit, with the membership it held (its next poll would learn it lost it)."""


def message_id(session_id: str, partition: int, seq: int) -> str:
    """A record's identity, the producer's: ``<session_id>:<partition>:<seq>`` of the value."""
    return f"{session_id}:{partition}:{seq}"


_MEMBERSHIP = [
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("consumer", pa.int32(), nullable=False),
    pa.field("consumer_session", pa.string(), nullable=False),
    pa.field("member_id", pa.string(), nullable=False),
    pa.field("generation", pa.int32(), nullable=False),
]

PROCESSED_SCHEMA = pa.schema(
    [
        *_MEMBERSHIP,
        pa.field("n", pa.int64(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("message_id", pa.string()),
        pa.field("session_id", pa.string()),
        pa.field("producer", pa.int32()),
        pa.field("seq", pa.int64()),
        pa.field("key", pa.string()),
        pa.field("key_seq", pa.int64()),
        pa.field("effect", pa.string(), nullable=False),
        pa.field("apply_order", pa.int64()),
        pa.field("processed_ms", pa.int64(), nullable=False),
        pa.field("watermark", pa.int64()),
        pa.field("assignment", pa.int32(), nullable=False),
    ]
)
"""The processed records: the message columns (``message_id`` .. ``key_seq``, from the value)
are null for a ``foreign`` record; ``apply_order`` (the sink's ``effects.apply_order``) is null
unless ``applied``; ``processed_ms`` is when the sink's transaction ended; ``watermark`` is the
end of the partition as the consumer's client last learned it from a fetch when the record was
handed out (the high watermark; the last stable offset under read_committed), null where the
client did not say; ``assignment`` is how often the session's client had been assigned the
partition by then (its rebalance callbacks: 1 for its first assignment), so that a partition
lost and assigned again starts an epoch of its own even where the client's generation does not
show it (Kafka's Java client 3.9.2 under KIP-848 kept reporting member epoch 3 across such a
re-assignment)."""

COMMITS_SCHEMA = pa.schema(
    [
        *_MEMBERSHIP,
        pa.field("commit", pa.int64(), nullable=False),
        pa.field("trigger", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("committed_ms", pa.int64(), nullable=False),
    ]
)
"""The commits: ``commit`` numbers a session's commits (0, 1, ...; one per request, a row per
partition); ``offset`` is the committed position (the next record to read); ``error`` is null
on success, else librdkafka's error name (for the partition, or for the whole request)."""


class ConsumerSessionInfo(BaseModel):
    """One consumer process lifetime: a new session (and a new group member) on every start."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    consumer: int
    started_ms: int
    ended_ms: int | None = None


class ConsumptionInfo(BaseModel):
    """``run.json``'s ``consumption``: the consumer workload's group, mode and sink."""

    model_config = ConfigDict(extra="forbid")

    group: str
    mode: HandlerMode
    group_protocol: GroupProtocol = "classic"
    sink: str
    """``sqlite:<path>`` or the PostgreSQL URL without its password."""
    consumers: int
    consumer_config: dict[str, str | int | float | bool] = Field(default_factory=dict)
    sessions: list[ConsumerSessionInfo] = Field(default_factory=list)
