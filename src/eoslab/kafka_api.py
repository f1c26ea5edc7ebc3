"""Kafka API keys and error codes by the names Kafka's docs and logs use ("Produce",
"OUT_OF_ORDER_SEQUENCE_NUMBER"), from kio's index: the one parser the proxy, the reference
broker, the nemesis and the scenario files share. The wire carries numbers. And the framing of
one request and its response, for the lab's own protocol-level clients (the probe, the
DescribeQuorum of :mod:`eoslab.admin`)."""

from __future__ import annotations

import io
import struct
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.serial import entity_reader, entity_writer

SIZE_PREFIX = struct.Struct(">i")

API_NAMES: dict[int, str] = {
    key: "".join(part.capitalize() for part in snake.split("_"))
    for key, snake in api_key_map.items()
}
"""API key -> protocol name: 0 -> "Produce", 22 -> "InitProducerId"."""
_KEYS_BY_FOLDED_NAME: dict[str, int] = {name.lower(): key for key, name in API_NAMES.items()}


def api_name(api_key: int) -> str:
    """The protocol name of ``api_key``, or "Api<key>" for a key kio does not know (counters
    never lose a request for want of a name)."""
    return API_NAMES.get(api_key, f"Api{api_key}")


def parse_api_key(value: str | int) -> int:
    """An API key from its number or its name in any case and spelling ("Produce", "produce",
    "init_producer_id", "init-producer-id", 22). Raises ValueError naming the unknown value."""
    if isinstance(value, int) or value.isdigit():
        key = int(value)
        if key in API_NAMES:
            return key
        raise ValueError(f"unknown API key {key}")
    folded = value.replace("_", "").replace("-", "").lower()
    if folded in _KEYS_BY_FOLDED_NAME:
        return _KEYS_BY_FOLDED_NAME[folded]
    raise ValueError(f"unknown API name {value!r} (Kafka names such as 'Produce', 'Fetch')")


def error_name(code: ErrorCode | int) -> str:
    """Kafka's name of an error code, as clients print it: "NONE", "OUT_OF_ORDER_SEQUENCE_NUMBER"."""
    return ErrorCode(code).name.upper()


def parse_error(value: str | int) -> ErrorCode:
    """An error code from its name in any case ("OUT_OF_ORDER_SEQUENCE_NUMBER",
    "out_of_order_sequence_number") or its number (45). Raises ValueError when unknown."""
    if isinstance(value, int) or value.lstrip("-").isdigit():
        try:
            return ErrorCode(int(value))
        except ValueError:
            raise ValueError(f"unknown Kafka error code {value}") from None
    try:
        return ErrorCode[value.lower()]
    except KeyError:
        raise ValueError(
            f"unknown Kafka error {value!r} (names such as OUT_OF_ORDER_SEQUENCE_NUMBER)"
        ) from None


def encode_request(request: Any, correlation_id: int, client_id: str | None) -> bytes:
    """Size prefix + the request header version its schema names (v1 or v2) + the body."""
    header = request.__header_schema__(
        request_api_key=request.__api_key__,
        request_api_version=request.__version__,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    buffer = io.BytesIO()
    entity_writer(type(header))(buffer, header)
    entity_writer(type(request))(buffer, request)
    return SIZE_PREFIX.pack(buffer.tell()) + buffer.getvalue()


def decode_response(frame: bytes, response_type: type[Any]) -> Any:
    """A response body from its frame (without the size prefix), past its header."""
    _header, size = entity_reader(response_type.__header_schema__)(frame, 0)
    response, _ = entity_reader(response_type)(frame, size)
    return response
