"""Thin helpers over kio: encoding and decoding entities, and building responses.

kio has one class per (API, version); these helpers let one handler fill any version of a
response from a single set of values.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import sys
from functools import cache
from typing import Any, TypeVar

from kio.serial import entity_reader, entity_writer

E = TypeVar("E")


@cache
def _writer(entity_type: Any) -> Any:
    return entity_writer(entity_type)


@cache
def _reader(entity_type: Any) -> Any:
    return entity_reader(entity_type)


def encode(*entities: Any) -> bytes:
    """Serialise entities back to back (a header then a body)."""
    buffer = io.BytesIO()
    for entity in entities:
        entity_type: Any = type(entity)
        _writer(entity_type)(buffer, entity)
    return buffer.getvalue()


def decode(entity_type: Any, buffer: bytes | memoryview, offset: int = 0) -> tuple[Any, int]:
    """(entity, bytes consumed); raises whatever kio raises on malformed input."""
    entity, size = _reader(entity_type)(buffer, offset)
    return entity, size


def build(entity_type: type[E], **values: object) -> E:
    """Instantiate a kio entity from values meant for all versions, keeping the ones it has."""
    fields: Any = entity_type  # a kio entity is a dataclass
    names = {f.name for f in dataclasses.fields(fields)}
    return entity_type(**{name: value for name, value in values.items() if name in names})


def nested(owner: type, name: str) -> type:
    """The nested entity class `name` from the module that defines `owner` (same version)."""
    entity_type = getattr(sys.modules[owner.__module__], name)
    assert isinstance(entity_type, type)
    return entity_type


def has_field(entity_type: type, name: str) -> bool:
    return any(f.name == name for f in dataclasses.fields(entity_type))


@cache
def _non_nullable(entity_type: Any) -> tuple[str, ...]:
    """Fields kio types without `| None`: Kafka refuses a null there when it parses."""
    return tuple(f.name for f in dataclasses.fields(entity_type) if "None" not in str(f.type))


def null_field(entity: Any) -> str | None:
    """The first non-nullable field (nested entities included) that decoded as null: kio reads
    a null array or string anywhere, Kafka's parser rejects the request."""
    entity_type: Any = type(entity)
    for name in _non_nullable(entity_type):
        value = getattr(entity, name)
        if value is None:
            return f"{type(entity).__name__}.{name}"
        if isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item) and (found := null_field(item)) is not None:
                    return found
    return None


def millis(value: datetime.timedelta) -> int:
    """A kio duration field in milliseconds, as Kafka carries it."""
    return int(value / datetime.timedelta(milliseconds=1))
