"""The workload's message format, version 1: who sent a record and its place in two sequences.

Every workload record says which run, producer session, partition and key it belongs to, and
its sequence number per (session, partition) and per (session, key), so that the checker can
find lost, duplicated, reordered and skipped records from the topic alone.

Record key: the UTF-8 key string (``k17``), never null for workload records.
Record value: UTF-8, the fields of :data:`FIELDS` joined by ``|``::

    eos1|<run_id>|<session_id>|<producer>|<partition>|<seq>|<key>|<key_seq>|<padding>

- ``eos1``: :data:`FORMAT_TAG`, the format and its version;
- ``run_id``: the run (see :func:`eoslab.rundir.new_run_id`);
- ``session_id``: a fresh uuid4 hex (32 chars) on every producer (re)start;
- ``producer``: the producer index 0..P-1;
- ``partition``: the partition the workload chose (it sets it explicitly on produce);
- ``seq``: 0, 1, 2, ... per (session, partition);
- ``key``: the record key again;
- ``key_seq``: 0, 1, 2, ... per (session, key);
- ``padding``: ``x`` repeated to reach the configured value size (may be empty).

A **copy** (the copier stage, consume-transform-produce) keeps the input record's key and
wraps its value, so that every copy names the input it was made from::

    eoscopy1|<in_partition>|<in_offset>|<copier_session>|<txn>|<the input's value>

(:data:`COPY_FIELDS`; the input's value last, verbatim, so a split with a limit of
``len(COPY_FIELDS)`` parts keeps it whole).

Spark parses it with plain SQL functions, never a Python UDF::

    parts = split(CAST(value AS STRING), '\\\\|')
    element_at(parts, FIELD_INDEX["seq"] + 1)  -- element_at is 1-based
"""

from __future__ import annotations

from dataclasses import dataclass

FORMAT_TAG = "eos1"
SEPARATOR = "|"
PADDING_CHAR = "x"

RECORD_FIELDS: tuple[str, ...] = ("session_id", "producer", "partition", "seq", "key", "key_seq")
"""Who sent a record and its place in both sequences: the columns every table of the checker
keeps for a record (the history's, the ledger's, the anomalies')."""

FIELDS: tuple[str, ...] = ("tag", "run_id", *RECORD_FIELDS, "padding")
"""The value's fields in order; ``FIELDS[i]`` is ``split(value, '|')[i]``."""

FIELD_INDEX: dict[str, int] = {name: index for index, name in enumerate(FIELDS)}
"""0-based position of each field in the split value (Spark's ``element_at`` wants index + 1)."""


COPY_TAG = "eoscopy1"
COPY_FIELDS: tuple[str, ...] = (
    "tag",
    "in_partition",
    "in_offset",
    "copier_session",
    "txn",
    "value",
)
"""A copy's value fields in order (the last is the input's value)."""
COPY_FIELD_INDEX: dict[str, int] = {name: index for index, name in enumerate(COPY_FIELDS)}


class MessageFormatError(ValueError):
    """A record that is not a version-1 workload message (a foreign record, or a corrupt one)."""


@dataclass(frozen=True, slots=True)
class Message:
    """One workload record as the producer wrote it."""

    run_id: str
    session_id: str
    producer: int
    partition: int
    seq: int
    key: str
    key_seq: int
    padding: str = ""

    def __post_init__(self) -> None:
        for name in ("run_id", "session_id", "key", "padding"):
            if SEPARATOR in getattr(self, name):
                raise MessageFormatError(f"{name} must not contain {SEPARATOR!r}")
        if self.padding.strip(PADDING_CHAR):
            raise MessageFormatError(f"padding must be made of {PADDING_CHAR!r} only")
        for name in ("producer", "partition", "seq", "key_seq"):
            if getattr(self, name) < 0:
                raise MessageFormatError(f"{name} must be >= 0")
        if not self.key:
            raise MessageFormatError("key must not be empty")


def encode_key(message: Message) -> bytes:
    """The record key: the key string in UTF-8."""
    return message.key.encode()


def encode_value(message: Message) -> bytes:
    """The record value: the fields of :data:`FIELDS` joined by ``|``, in UTF-8."""
    return SEPARATOR.join(
        (
            FORMAT_TAG,
            message.run_id,
            message.session_id,
            str(message.producer),
            str(message.partition),
            str(message.seq),
            message.key,
            str(message.key_seq),
            message.padding,
        )
    ).encode()


def padding_for(message: Message, value_size: int) -> str:
    """The padding that makes ``message``'s encoded value ``value_size`` bytes long (or none
    when the fields alone are longer)."""
    unpadded = len(encode_value(message)) - len(message.padding.encode())
    return PADDING_CHAR * max(0, value_size - unpadded)


def decode(key: bytes | None, value: bytes | None) -> Message:
    """Parse a record written by the workload; :class:`MessageFormatError` says why not."""
    if value is None:
        raise MessageFormatError("null value")
    try:
        text = value.decode()
    except UnicodeDecodeError as error:
        raise MessageFormatError(f"value is not UTF-8: {error}") from error
    parts = text.split(SEPARATOR)
    if parts[0] != FORMAT_TAG:
        raise MessageFormatError(f"format tag {parts[0][:16]!r}, expected {FORMAT_TAG!r}")
    if len(parts) != len(FIELDS):
        raise MessageFormatError(f"{len(parts)} fields, expected {len(FIELDS)}")
    fields = dict(zip(FIELDS, parts, strict=True))
    try:
        message = Message(
            run_id=fields["run_id"],
            session_id=fields["session_id"],
            producer=int(fields["producer"]),
            partition=int(fields["partition"]),
            seq=int(fields["seq"]),
            key=fields["key"],
            key_seq=int(fields["key_seq"]),
            padding=fields["padding"],
        )
    except ValueError as error:
        raise MessageFormatError(f"bad field: {error}") from error
    if key is not None and key != encode_key(message):
        raise MessageFormatError(f"record key {key[:32]!r} differs from the value's key")
    return message


@dataclass(frozen=True, slots=True)
class Copy:
    """One copy as the copier wrote it: the input's place, who copied it, the input's value."""

    in_partition: int
    in_offset: int
    copier_session: str
    txn: int
    value: bytes


def encode_copy(copy: Copy) -> bytes:
    """A copy's value: :data:`COPY_FIELDS` joined by ``|``, the input's value last."""
    if SEPARATOR in copy.copier_session:
        raise MessageFormatError(f"copier_session must not contain {SEPARATOR!r}")
    head = (COPY_TAG, str(copy.in_partition), str(copy.in_offset), copy.copier_session)
    return SEPARATOR.join((*head, str(copy.txn))).encode() + SEPARATOR.encode() + copy.value


def decode_copy(value: bytes | None) -> Copy:
    """Parse a copy's value; :class:`MessageFormatError` says why it is not one."""
    if value is None:
        raise MessageFormatError("null value")
    parts = value.split(SEPARATOR.encode(), len(COPY_FIELDS) - 1)
    if parts[0] != COPY_TAG.encode() or len(parts) != len(COPY_FIELDS):
        raise MessageFormatError(f"not a {COPY_TAG} copy: {value[:24]!r}")
    try:
        return Copy(
            in_partition=int(parts[1]),
            in_offset=int(parts[2]),
            copier_session=parts[3].decode(),
            txn=int(parts[4]),
            value=parts[5],
        )
    except (ValueError, UnicodeDecodeError) as error:
        raise MessageFormatError(f"bad copy field: {error}") from error
