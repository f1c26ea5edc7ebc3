"""The workload's message format, version 2: who sent a record, its place in two sequences,
and a checksum of it all.

Every workload record says which run, producer session, partition and key it belongs to, and
its sequence number per (session, partition) and per (session, key), so that the checker can
find lost, duplicated, reordered and skipped records from the topic alone; its checksum tells a
value that still parses but was changed on the way (a ``corrupt`` record) from the one sent.

Record key: the UTF-8 key string (``k17``), never null for workload records.
Record value: UTF-8, the fields of :data:`FIELDS` joined by ``|``::

    eos2|<run_id>|<session_id>|<producer>|<partition>|<seq>|<key>|<key_seq>|<padding>|<checksum>

- ``eos2``: :data:`FORMAT_TAG`, the format and its version;
- ``run_id``: the run (see :func:`eoslab.rundir.new_run_id`);
- ``session_id``: a fresh uuid4 hex (32 chars) on every producer (re)start;
- ``producer``: the producer index 0..P-1;
- ``partition``: the partition the workload chose (it sets it explicitly on produce);
- ``seq``: 0, 1, 2, ... per (session, partition);
- ``key``: the record key again;
- ``key_seq``: 0, 1, 2, ... per (session, key);
- ``padding``: ``x`` repeated to reach the configured value size (may be empty);
- ``checksum``: the CRC-32 (zlib's, Java's ``java.util.zip.CRC32``, Spark SQL's ``crc32``) of
  every byte of the value before the ``|`` that precedes it, as 8 lowercase hex digits (a
  fixed width, so that padding still sizes a value exactly).

Version 1 (:data:`V1_TAG`, ``eos1``) is the same without the checksum: runs written before the
checksum stay readable, and their records are never judged corrupt (nothing to judge them by).

A **copy** (the copier stage, consume-transform-produce) keeps the input record's key and
wraps its value, so that every copy names the input it was made from::

    eoscopy1|<in_partition>|<in_offset>|<copier_session>|<txn>|<the input's value>

(:data:`COPY_FIELDS`; the input's value last, verbatim, so a split with a limit of
``len(COPY_FIELDS)`` parts keeps it whole).

Spark parses it with plain SQL functions, never a Python UDF::

    parts = split(CAST(value AS STRING), '\\\\|')
    element_at(parts, FIELD_INDEX["seq"] + 1)  -- element_at is 1-based
    crc32(substring(value, 1, octet_length(value) - 9)) = conv(element_at(parts, 10), 16, 10)
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

FORMAT_TAG = "eos2"
V1_TAG = "eos1"
"""The format before the checksum: read, never written."""
SEPARATOR = "|"
PADDING_CHAR = "x"
CHECKSUM_DIGITS = 8

RECORD_FIELDS: tuple[str, ...] = ("session_id", "producer", "partition", "seq", "key", "key_seq")
"""Who sent a record and its place in both sequences: the columns every table of the checker
keeps for a record (the history's, the ledger's, the anomalies')."""

FIELDS: tuple[str, ...] = ("tag", "run_id", *RECORD_FIELDS, "padding", "checksum")
"""The value's fields in order; ``FIELDS[i]`` is ``split(value, '|')[i]``."""
V1_FIELDS: tuple[str, ...] = FIELDS[:-1]
"""Version 1's fields: the same, without the checksum."""
FIELD_COUNTS: dict[str, int] = {FORMAT_TAG: len(FIELDS), V1_TAG: len(V1_FIELDS)}
"""Each readable format's tag -> its number of fields."""

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
    """A record that is not a workload message (a foreign record, or one that no longer parses)."""


class CorruptMessageError(MessageFormatError):
    """A value that parses as a workload message but fails its checksum: changed on the way.
    ``message`` is what it parses as (its run, its partition: whose corrupt record it is)."""

    def __init__(self, message: Message, detail: str) -> None:
        super().__init__(detail)
        self.message = message


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


def checksum(signed: bytes) -> bytes:
    """The checksum field of a value whose bytes before it are ``signed``."""
    return b"%08x" % zlib.crc32(signed)


def signed(body: bytes) -> bytes:
    """A version-2 value from its fields before the checksum (``signed``: joined by ``|``):
    the checksum appended."""
    return body + SEPARATOR.encode() + checksum(body)


def encode_value(message: Message) -> bytes:
    """The record value: the fields of :data:`FIELDS` joined by ``|``, in UTF-8."""
    return signed(
        SEPARATOR.join(
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
    )


def padding_for(message: Message, value_size: int) -> str:
    """The padding that makes ``message``'s encoded value ``value_size`` bytes long (or none
    when the fields alone are longer)."""
    unpadded = len(encode_value(message)) - len(message.padding.encode())
    return PADDING_CHAR * max(0, value_size - unpadded)


def decode(key: bytes | None, value: bytes | None) -> Message:
    """Parse a record written by the workload (either version); :class:`MessageFormatError`
    says why not, :class:`CorruptMessageError` when it parses but fails its checksum."""
    if value is None:
        raise MessageFormatError("null value")
    parts = value.split(SEPARATOR.encode())
    tag = parts[0].decode(errors="replace")
    if tag not in FIELD_COUNTS:
        raise MessageFormatError(f"format tag {tag[:16]!r}, expected {FORMAT_TAG!r}")
    if len(parts) != FIELD_COUNTS[tag]:
        raise MessageFormatError(f"{len(parts)} fields, expected {FIELD_COUNTS[tag]}")
    try:
        fields = dict(zip(FIELDS, (part.decode() for part in parts), strict=False))
    except UnicodeDecodeError as error:
        raise MessageFormatError(f"value is not UTF-8: {error}") from error
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
    if tag == FORMAT_TAG and checksum(value[: value.rfind(SEPARATOR.encode())]) != parts[-1]:
        raise CorruptMessageError(message, f"checksum {parts[-1][:16]!r} does not match the value")
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
