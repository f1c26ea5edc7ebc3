"""Structure-aware malformed frames: valid requests built from kio's schema classes, then broken.

Deterministic: :class:`FrameMutator` with one seed yields the same frames in the same order.
Every frame starts as a valid request of an (API key, version) the reference broker
advertises, with fields drawn from a small vocabulary (the soak's own topics, groups and
transactional ids) so that requests reach the handlers' logic, then one mutation from
:data:`MUTATIONS` is applied.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import random
import struct
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from crc32c import crc32c
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
)
from kio.serial.writers import write_unsigned_varint
from kio.static.primitive import uvarint

from eoslab.kafka_api import encode_request
from eoslab.probe.batches import record_batch

SIZE_PREFIX = struct.Struct(">i")
FUZZ_TOPICS = ("soak-fuzz-a", "soak-fuzz-b")
"""The topics the frames name (created before the soak); never the well-behaved clients'."""
STRINGS = (*FUZZ_TOPICS, "soak-group", "soak-txn", "soak-member", "", "range", "consumer")
CRC_POSITION = 17
CRC_COVERED_FROM = 21
"""A v2 record batch: base offset, length, leader epoch, magic, then the CRC of the rest."""
MARKER = "SOAKMARKER"
"""A string planted in a field to find its length prefix in the encoding."""

MUTATION_WEIGHTS = {
    "valid": 2,
    "flip": 6,
    "field-extreme": 4,
    "length-long": 1,
    "length-short": 1,
    "length-negative": 1,
    "truncate": 2,
    "cut": 1,
    "oversized-string": 2,
    "oversized-array": 2,
    "unknown-api-key": 1,
    "unknown-api-version": 1,
    "records-garbage": 1,
    "records-bad-crc": 1,
    "records-garbage-good-crc": 1,
}
"""How often each mutation is drawn: the ones that need a connection of their own (a lying
size prefix) less often, since every such frame costs a connect."""
MUTATIONS = tuple(MUTATION_WEIGHTS)
RECORDS_MUTATIONS = ("records-garbage", "records-bad-crc", "records-garbage-good-crc")
PRODUCE = 0


@dataclass(frozen=True)
class Frame:
    """One frame to send: ``data`` includes the size prefix."""

    index: int
    api_key: int
    api_version: int
    mutation: str
    data: bytes
    consistent: bool
    """Whether the size prefix counts exactly the bytes that follow: False frames go on a
    connection of their own, half-closed after them (the broker would wait for the rest)."""

    @property
    def correlation_id(self) -> int | None:
        """What the header bytes say (the broker echoes it), if they are there."""
        if len(self.data) < 12:
            return None
        return int(struct.unpack_from(">i", self.data, 8)[0])


def _int_value(rng: random.Random, kafka_type: str, name: str) -> int:
    if name == "acks":
        return rng.choice((-1, 1))
    if "partition" in name and kafka_type == "int32":
        return rng.choice((0, 0, 1, 2, -1))
    if kafka_type == "int8":
        return rng.choice((0, 0, 1))
    return rng.choice((0, 0, 1, 2, -1, rng.randrange(0, 1000)))


def _timedelta(rng: random.Random, name: str) -> datetime.timedelta:
    if "session_timeout" in name:
        ms = rng.choice((6000, 10_000, 100))
    elif "transaction_timeout" in name:
        ms = rng.choice((60_000, 1000))
    else:
        ms = rng.choice((0, 0, 10, 100))
    return datetime.timedelta(milliseconds=ms)


def _records(rng: random.Random) -> bytes:
    values = [f"soak/{rng.randrange(1000)}".encode() for _ in range(rng.randint(1, 3))]
    at = datetime.datetime.fromtimestamp(1_700_000_000 + rng.randrange(10**6), datetime.UTC)
    pid, epoch, sequence = rng.randrange(0, 50), rng.randrange(0, 3), rng.randrange(0, 20)
    return record_batch(pid, epoch, sequence, values, timestamp=at)


def _primitive(rng: random.Random, kafka_type: str, name: str) -> object:
    match kafka_type:
        case "bool":
            return rng.random() < 0.5
        case "int8" | "int16" | "int32" | "int64":
            return _int_value(rng, kafka_type, name)
        case "uint16":
            return rng.randrange(0, 100)
        case "float64":
            return rng.random()
        case "string":
            return rng.choice(STRINGS)
        case "bytes":
            return rng.randbytes(rng.randrange(0, 16))
        case "records":
            return _records(rng)
        case "uuid":
            return uuid.UUID(int=rng.getrandbits(128)) if rng.random() < 0.5 else None
        case "error_code":
            return ErrorCode.none
        case "timedelta_i32" | "timedelta_i64":
            return _timedelta(rng, name)
        case "datetime_i64":
            return datetime.datetime.fromtimestamp(rng.randrange(0, 2**31), datetime.UTC)
    raise ValueError(f"no generator for kafka type {kafka_type!r}")


@dataclass(frozen=True)
class _Field:
    name: str
    shape: Any
    kafka_type: str
    optional: bool


@cache
def _fields(entity_type: Any) -> tuple[_Field, ...]:
    return tuple(
        _Field(
            field.name,
            classify_field(field),
            field.metadata.get("kafka_type", "entity"),
            "None" in str(field.type),
        )
        for field in dataclasses.fields(entity_type)
    )


def build_entity(entity_type: Any, rng: random.Random, depth: int = 0) -> Any:
    """A valid instance of a kio entity, every field drawn from the vocabulary."""
    values: dict[str, object] = {}
    for field in _fields(entity_type):
        shape, optional = field.shape, field.optional
        if optional and rng.random() < 0.1 and depth > 0:
            values[field.name] = None
            continue
        if isinstance(shape, EntityTupleField):
            count = rng.choice((0, 1, 1, 2)) if depth < 3 else 0
            values[field.name] = tuple(
                build_entity(shape.type_, rng, depth + 1) for _ in range(count)
            )
        elif isinstance(shape, EntityField):
            values[field.name] = build_entity(shape.type_, rng, depth + 1)
        elif isinstance(shape, PrimitiveTupleField):
            values[field.name] = tuple(
                _primitive(rng, field.kafka_type, field.name) for _ in range(rng.choice((0, 1, 2)))
            )
        else:
            value = _primitive(rng, field.kafka_type, field.name)
            if value is None and not optional:
                value = uuid.UUID(int=0)
            values[field.name] = value
    return entity_type(**values)


def _extreme(kafka_type: str, rng: random.Random) -> object:
    """A boundary value for one leaf field."""
    match kafka_type:
        case "int8":
            return rng.choice((-128, 127, -1))
        case "int16":
            return rng.choice((-(2**15), 2**15 - 1, -1))
        case "int32":
            return rng.choice((-(2**31), 2**31 - 1, -1))
        case "int64":
            return rng.choice((-(2**63), 2**63 - 1, -1))
        case "uint16":
            return rng.choice((0, 2**16 - 1))
        case "float64":
            return rng.choice((float("nan"), float("inf"), -1.0))
        case "string":
            return rng.choice(
                ("", "x" * 300, "\u00e9" * 40, "../../etc", "a.b", "__consumer_offsets")
            )
        case "bytes":
            return rng.randbytes(rng.choice((0, 1000)))
        case "records":
            return b"" if rng.random() < 0.5 else rng.randbytes(64)
        case "timedelta_i32":
            return datetime.timedelta(milliseconds=rng.choice((-1, 0, 2**31 - 1)))
        case "timedelta_i64":
            return datetime.timedelta(milliseconds=rng.choice((-1, 0, 2**40)))
    return None  # bool, uuid, error_code, datetime: nothing beyond what generation covers


Leaf = tuple[tuple[str | int, ...], str, bool]
"""(path of attribute names and tuple indexes, kafka type, tagged) of one primitive field."""


def leaves(entity: Any, path: tuple[str | int, ...] = ()) -> Iterator[Leaf]:
    for field in dataclasses.fields(entity):
        value = getattr(entity, field.name)
        if dataclasses.is_dataclass(value):
            yield from leaves(value, (*path, field.name))
        elif isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            for i, item in enumerate(value):
                yield from leaves(item, (*path, field.name, i))
        elif not isinstance(value, tuple) and "kafka_type" in field.metadata:
            yield (*path, field.name), field.metadata["kafka_type"], "tag" in field.metadata


def replaced(entity: Any, path: tuple[str | int, ...], value: object) -> Any:
    """``entity`` with the leaf at ``path`` set to ``value``."""
    name = path[0]
    assert isinstance(name, str)
    if len(path) == 1:
        return dataclasses.replace(entity, **{name: value})
    child = getattr(entity, name)
    if isinstance(child, tuple):
        index = path[1]
        assert isinstance(index, int)
        items = list(child)
        items[index] = replaced(items[index], path[2:], value)
        return dataclasses.replace(entity, **{name: tuple(items)})
    return dataclasses.replace(entity, **{name: replaced(child, path[1:], value)})


def _reframe(body: bytes) -> bytes:
    return SIZE_PREFIX.pack(len(body)) + body


def _uvarint(value: int) -> bytes:
    buffer = io.BytesIO()
    write_unsigned_varint(buffer, uvarint(value))
    return buffer.getvalue()


@cache
def _request_type(api_key: int, api_version: int) -> Any:
    return load_request_schema(api_key, api_version)


class FrameMutator:
    """Frames for every (API key, version) in ``served`` (ApiVersions' ranges), seeded."""

    def __init__(self, seed: int, served: Mapping[int, tuple[int, int]]) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.apis = [
            (key, v) for key, (low, high) in sorted(served.items()) for v in range(low, high + 1)
        ]
        self.served = dict(served)
        self.index = 0
        self._weights = list(MUTATION_WEIGHTS.values())
        self._mutators: dict[str, Callable[[Any, bytes], tuple[bytes, bool] | None]] = {
            "valid": lambda request, frame: (frame, True),
            "flip": self._flip,
            "field-extreme": self._field_extreme,
            "length-long": self._length_long,
            "length-short": self._length_short,
            "length-negative": lambda request, frame: (
                SIZE_PREFIX.pack(self.rng.choice((-1, -(2**31), 0, 7))) + frame[4:],
                False,
            ),
            "truncate": self._truncate,
            "cut": lambda request, frame: (frame[: self.rng.randrange(1, len(frame))], False),
            "oversized-string": lambda request, frame: self._oversized(request, array=False),
            "oversized-array": lambda request, frame: self._oversized(request, array=True),
            "unknown-api-key": self._unknown_api_key,
            "unknown-api-version": self._unknown_api_version,
            **dict.fromkeys(RECORDS_MUTATIONS, self._records_mutation),
        }

    def __iter__(self) -> Iterator[Frame]:
        return self

    def __next__(self) -> Frame:
        while True:
            frame = self._attempt()
            if frame is not None:
                return frame

    def take(self, count: int) -> list[Frame]:
        return [next(self) for _ in range(count)]

    def _attempt(self) -> Frame | None:
        rng = self.rng
        api_key, api_version = rng.choice(self.apis)
        (mutation,) = rng.choices(MUTATIONS, self._weights)
        if mutation in RECORDS_MUTATIONS:
            api_key = PRODUCE
            api_version = rng.randint(*self.served[PRODUCE])
        self._mutation = mutation
        request = build_entity(_request_type(api_key, api_version), rng)
        try:
            valid = encode_request(request, self.index, rng.choice(("soak", None)))
            result = self._mutators[mutation](request, valid)
        except (ValueError, TypeError, OverflowError, struct.error):
            return None  # a value kio refuses to write: draw again
        if result is None:
            return None
        data, consistent = result
        frame = Frame(self.index, api_key, api_version, mutation, data, consistent)
        self.index += 1
        return frame

    # ------------------------------------------------------------------ the mutations
    def _flip(self, request: Any, frame: bytes) -> tuple[bytes, bool]:
        data = bytearray(frame)
        for _ in range(self.rng.randint(1, 8)):
            data[self.rng.randrange(4, len(data))] = self.rng.randrange(256)
        return bytes(data), True

    def _field_extreme(self, request: Any, frame: bytes) -> tuple[bytes, bool] | None:
        candidates = [leaf for leaf in leaves(request) if not leaf[2]]
        if not candidates:
            return None
        path, kafka_type, _ = self.rng.choice(candidates)
        value = _extreme(kafka_type, self.rng)
        if value is None:
            return None
        return encode_request(replaced(request, path, value), self.index, "soak"), True

    def _length_long(self, request: Any, frame: bytes) -> tuple[bytes, bool]:
        extra = self.rng.choice((1, 100, 1 << 20, (100 << 20) - 1, 2**31 - 1))
        return SIZE_PREFIX.pack(len(frame) - 4 + extra) + frame[4:], False

    def _length_short(self, request: Any, frame: bytes) -> tuple[bytes, bool] | None:
        if len(frame) <= 12:
            return None
        return SIZE_PREFIX.pack(self.rng.randrange(8, len(frame) - 4)) + frame[4:], False

    def _truncate(self, request: Any, frame: bytes) -> tuple[bytes, bool] | None:
        if len(frame) <= 13:
            return None
        return _reframe(frame[4 : self.rng.randrange(12, len(frame))]), True

    def _oversized(self, request: Any, *, array: bool) -> tuple[bytes, bool] | None:
        """A string's (or its array's) count much larger than what follows."""
        strings = [leaf for leaf in leaves(request) if leaf[1] == "string" and not leaf[2]]
        if array:  # the first field of an array's first element: the count precedes it
            strings = [leaf for leaf in strings if len(leaf[0]) >= 3 and leaf[0][-2] == 0]
        if not strings:
            return None
        path = self.rng.choice(strings)[0]
        body = encode_request(replaced(request, path, MARKER), self.index, "soak")[4:]
        at = body.find(MARKER.encode())
        flexible = bool(type(request).__flexible__)
        # 2^33 fits a 5-byte varint: the count that made kio's native reader abort the broker
        huge = self.rng.choice((2**15 - 1, 2**31 - 2, 1 << 20, 2**33))
        if not array:
            if flexible:
                return _reframe(body[: at - 1] + _uvarint(huge + 1) + body[at:]), True
            return _reframe(
                body[: at - 2] + struct.pack(">h", min(huge, 2**15 - 1)) + body[at:]
            ), True
        count_end = at - (1 if flexible else 2)
        if flexible:
            return _reframe(body[: count_end - 1] + _uvarint(huge + 1) + body[count_end:]), True
        count = struct.pack(">i", min(huge, 2**31 - 1))
        return _reframe(body[: count_end - 4] + count + body[count_end:]), True

    def _unknown_api_key(self, request: Any, frame: bytes) -> tuple[bytes, bool]:
        key = self.rng.choice((-1, 4, 7, 17, 57, 67, 1000, 2**15 - 1))
        return frame[:4] + struct.pack(">h", key) + frame[6:], True

    def _unknown_api_version(self, request: Any, frame: bytes) -> tuple[bytes, bool]:
        _low, high = self.served[int(request.__api_key__)]
        version = self.rng.choice((-1, high + 1, high + 5, 2**15 - 1))
        return frame[:6] + struct.pack(">h", version) + frame[8:], True

    def _records_mutation(self, request: Any, frame: bytes) -> tuple[bytes, bool] | None:
        path = next((leaf[0] for leaf in leaves(request) if leaf[1] == "records"), None)
        if path is None:
            return None
        batch = bytearray(_records(self.rng))
        if self._mutation == "records-garbage":
            batch = bytearray(self.rng.randbytes(self.rng.choice((1, 12, 61, 100, 500))))
        else:
            for _ in range(self.rng.randint(1, 4)):
                batch[self.rng.randrange(CRC_COVERED_FROM, len(batch))] = self.rng.randrange(256)
            if self._mutation == "records-garbage-good-crc":
                crc = crc32c(bytes(batch[CRC_COVERED_FROM:]))
                struct.pack_into(">I", batch, CRC_POSITION, crc)
        return encode_request(replaced(request, path, bytes(batch)), self.index, "soak"), True
