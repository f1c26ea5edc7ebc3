"""Thin helpers over kio: API names, error names, encoding entities, and building responses.

kio has one class per (API, version); these helpers let one handler fill any version of a
response from a single set of values.
"""

from __future__ import annotations

import dataclasses
import io
import sys
from functools import cache
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.serial import entity_reader, entity_writer

E = TypeVar("E")


def api_name(api_key: int) -> str:
    """'produce' for 0; unknown keys keep their number so counters never lose them."""
    return api_key_map.get(api_key, f"api_{api_key}")


def api_key_from_name(text: str | int) -> int:
    """Accepts 0, '0', 'produce', 'Produce' or 'PRODUCE' (the control API's spelling freedom)."""
    if isinstance(text, int) or text.isdigit():
        key = int(text)
        if key in api_key_map:
            return key
    else:
        wanted = text.replace("-", "_").lower()
        camel_to_snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in text).lstrip("_")
        for key, name in api_key_map.items():
            if name in (wanted, camel_to_snake):
                return key
    raise ValueError(f"unknown Kafka API {text!r}")


def error_code_from_name(text: str | int) -> ErrorCode:
    """ErrorCode from 'OUT_OF_ORDER_SEQUENCE_NUMBER', 'out_of_order_sequence_number' or 45."""
    if isinstance(text, int) or text.lstrip("-").isdigit():
        return ErrorCode(int(text))
    try:
        return ErrorCode[text.lower()]
    except KeyError:
        raise ValueError(f"unknown Kafka error {text!r}") from None


@cache
def _writer(entity_type: type) -> Any:
    return entity_writer(entity_type)


@cache
def _reader(entity_type: type) -> Any:
    return entity_reader(entity_type)


def encode(*entities: object) -> bytes:
    """Serialise entities back to back (a header then a body)."""
    buffer = io.BytesIO()
    for entity in entities:
        _writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def decode(entity_type: type[E], buffer: bytes | memoryview, offset: int = 0) -> tuple[E, int]:
    """(entity, bytes consumed); raises whatever kio raises on malformed input."""
    entity, size = _reader(entity_type)(buffer, offset)
    return entity, size


def build(entity_type: type[E], **values: object) -> E:
    """Instantiate a kio entity from values meant for all versions, keeping the ones it has."""
    names = {f.name for f in dataclasses.fields(entity_type)}  # type: ignore[arg-type]
    return entity_type(**{name: value for name, value in values.items() if name in names})


def nested(owner: type, name: str) -> type:
    """The nested entity class `name` from the module that defines `owner` (same version)."""
    entity_type = getattr(sys.modules[owner.__module__], name)
    assert isinstance(entity_type, type)
    return entity_type


def has_field(entity_type: type, name: str) -> bool:
    return any(f.name == name for f in dataclasses.fields(entity_type))


@cache
def _non_nullable(entity_type: type) -> tuple[str, ...]:
    """Fields kio types without `| None`: Kafka refuses a null there when it parses."""
    return tuple(
        f.name
        for f in dataclasses.fields(entity_type)  # type: ignore[arg-type]
        if "None" not in str(f.type)
    )


def null_field(entity: object) -> str | None:
    """The first non-nullable field (nested entities included) that decoded as null: kio reads
    a null array or string anywhere, Kafka's parser rejects the request."""
    for name in _non_nullable(type(entity)):
        value = getattr(entity, name)
        if value is None:
            return f"{type(entity).__name__}.{name}"
        if isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item) and (found := null_field(item)) is not None:
                    return found
    return None
