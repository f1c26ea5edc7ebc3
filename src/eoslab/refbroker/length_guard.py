"""Kafka's guard against lying lengths, applied before kio's native reader sees a request.

kio's native reader (0.6.5) sizes an array's storage from the count on the wire before it
reads a single element. `make soak` found a 67-byte Metadata v11 request whose compact array
count (a 5-byte varint) was 9,788,855,015: the reader asked for 78 GB, the allocation failed,
and Rust aborts the process on a failed allocation (no exception to catch: the broker died).
Kafka's generated readers refuse any collection or string longer than the bytes that remain
("Tried to allocate a collection of size N, but there are only M bytes remaining"); this walks
a request the way kio reads it and applies that rule to every array, string and bytes length,
building nothing.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional

FIXED_SIZES = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "float64": 8,
    "uuid": 16,
    "error_code": 2,
    "timedelta_i32": 4,
    "timedelta_i64": 8,
    "datetime_i64": 8,
}
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
NULLABLE_MARKER = struct.Struct(">b")
"""A nullable struct's marker (int8: -1 null, 1 present)."""
MAX_VARINT_BYTES = 10


class LyingLengthError(ValueError):
    """A length or count on the wire larger than what remains of the request."""


@dataclass(frozen=True)
class _Field:
    name: str
    kafka_type: str
    is_array: bool
    entity: Any
    """The nested entity type (None for a primitive)."""
    nullable_entity: bool
    """A nullable struct outside an array: an int8 marker precedes it (KIP-893)."""


@dataclass(frozen=True)
class _Plan:
    flexible: bool
    legacy_strings: frozenset[str]
    """The request header's client_id: a legacy string even in a flexible header."""
    fields: tuple[_Field, ...]
    tagged: dict[int, _Field]


@cache
def _plan(entity_type: Any) -> _Plan:
    fields: list[_Field] = []
    tagged: dict[int, _Field] = {}
    for field in dataclasses.fields(entity_type):
        shape = classify_field(field)
        entity = shape.type_ if isinstance(shape, EntityField | EntityTupleField) else None
        tag = field.metadata.get("tag")
        described = _Field(
            field.name,
            field.metadata.get("kafka_type", "entity"),
            shape.is_array,
            entity,
            isinstance(shape, EntityField) and tag is None and is_optional(field),
        )
        if tag is None:
            fields.append(described)
        else:
            tagged[int(tag)] = described
    header = entity_type.__name__ == "RequestHeader"
    return _Plan(
        bool(entity_type.__flexible__),
        frozenset({"client_id"}) if header else frozenset(),
        tuple(fields),
        tagged,
    )


class _Walk:
    def __init__(self, buffer: bytes | memoryview, offset: int) -> None:
        self.buffer = buffer
        self.pos = offset

    @property
    def remaining(self) -> int:
        return len(self.buffer) - self.pos

    def take(self, size: int, what: str) -> None:
        if size > self.remaining:
            raise LyingLengthError(
                f"{what} of {size} bytes, but only {self.remaining} bytes remain"
            )
        self.pos += size

    def fixed(self, layout: struct.Struct, what: str) -> int:
        start = self.pos
        self.take(layout.size, what)
        return int(layout.unpack_from(self.buffer, start)[0])

    def uvarint(self, what: str) -> int:
        value = shift = 0
        for _ in range(MAX_VARINT_BYTES):
            start = self.pos
            self.take(1, what)
            byte = self.buffer[start]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
        raise LyingLengthError(f"{what}: a varint longer than {MAX_VARINT_BYTES} bytes")

    def length(self, flexible: bool, legacy: struct.Struct, what: str) -> int:
        """A length or count: compact (varint, +1) when flexible, else ``legacy``; -1 null."""
        return self.uvarint(what) - 1 if flexible else self.fixed(legacy, what)


def check_lengths(entity_type: Any, buffer: bytes | memoryview, offset: int = 0) -> int:
    """Walk one ``entity_type`` at ``offset`` as kio reads it; the offset after it. Raises
    LyingLengthError on any count or length beyond the bytes that remain."""
    walk = _Walk(buffer, offset)
    _entity(_plan(entity_type), walk)
    return walk.pos


def _entity(plan: _Plan, walk: _Walk) -> None:
    for field in plan.fields:
        _field(field, plan, walk)
    if not plan.flexible:
        return
    for _ in range(walk.uvarint("tagged field count")):
        tag = walk.uvarint("tag")
        size = walk.uvarint("tagged field size")
        start = walk.pos
        walk.take(size, f"tagged field {tag}")
        if (known := plan.tagged.get(tag)) is not None:
            inner = _Walk(walk.buffer[: start + size], start)
            _field(known, plan, inner)


def _field(field: _Field, plan: _Plan, walk: _Walk) -> None:
    if not field.is_array:
        _value(field, plan, walk)
        return
    count = walk.length(plan.flexible, INT32, f"{field.name} count")
    if count > walk.remaining:  # every element takes at least one byte
        raise LyingLengthError(
            f"{field.name}: a collection of size {count}, but only {walk.remaining} bytes remain"
        )
    for _ in range(count):
        _value(field, plan, walk, in_array=True)


def _value(field: _Field, plan: _Plan, walk: _Walk, *, in_array: bool = False) -> None:
    if field.entity is not None:
        if field.nullable_entity and not in_array and walk.fixed(NULLABLE_MARKER, field.name) < 0:
            return
        _entity(_plan(field.entity), walk)
        return
    kind = field.kafka_type
    if kind in FIXED_SIZES:
        walk.take(FIXED_SIZES[kind], field.name)
        return
    if kind == "string":
        compact = plan.flexible and field.name not in plan.legacy_strings
        size = walk.length(compact, INT16, f"{field.name} length")
    elif kind in ("bytes", "records"):
        size = walk.length(plan.flexible, INT32, f"{field.name} length")
    else:
        raise LyingLengthError(f"{field.name}: unknown kafka type {kind!r}")
    if size > 0:
        walk.take(size, field.name)
