"""Whether the bootstrap servers a fronting proxy is given are a Kafka cluster it can front:
reachable, answering ApiVersions and then Metadata in plaintext. One line saying why not
(unreachable, not Kafka, TLS, a listener that wants SASL first), so that `eoslab chaos front`
and external runs refuse a wrong address before any client is pointed at it.

TLS and SASL are out of scope: the proxy forwards plaintext frames, which it must read to
rewrite the endpoints. A TLS-terminating route would wrap its two sockets and fit beside it.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.api_versions.v0.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.serial.errors import SerialError

from eoslab.kafka_api import SIZE_PREFIX, decode_response, encode_request
from eoslab.proxy.endpoints import METADATA
from eoslab.proxy.faults.results import blank_values
from eoslab.settings import HostPort

TIMEOUT_S = 5.0
METADATA_VERSIONS = range(1, 13)
"""Metadata versions asked in (the newest both sides know): v1 is the first whose empty topic
list means no topic."""
TLS_RECORD_TYPES = (0x15, 0x16)
"""The first byte of a TLS alert or handshake record: a TLS listener's answer to plaintext."""
MAX_ANSWER = 16 * 1024 * 1024


class BootstrapError(ValueError):
    """The bootstrap servers cannot be fronted; the message is one line saying why."""


def check_bootstrap(servers: Sequence[HostPort]) -> int:
    """The number of brokers the first server that answers names; BootstrapError with the
    reason of each server that did not, when none did."""
    reasons = []
    for server in servers:
        try:
            return _brokers(server)
        except BootstrapError as error:
            reasons.append(str(error))
    raise BootstrapError("; ".join(reasons))


def _brokers(server: HostPort) -> int:
    try:
        sock = socket.create_connection((server.host, server.port), timeout=TIMEOUT_S)
    except OSError as error:
        raise BootstrapError(f"{server}: unreachable ({error.strerror or error})") from None
    with sock:
        versions = _ask(sock, server, ApiVersionsRequest(), ApiVersionsResponse, "ApiVersions")
        if versions.error_code != ErrorCode.none:
            raise BootstrapError(f"{server}: ApiVersions answered {versions.error_code.name}")
        metadata = next((key for key in versions.api_keys if key.api_key == METADATA), None)
        known = [
            v
            for v in METADATA_VERSIONS
            if metadata is not None and metadata.min_version <= v <= metadata.max_version
        ]
        if not known:
            raise BootstrapError(f"{server}: offers no Metadata version the proxy speaks")
        request_type: Any = load_request_schema(METADATA, known[-1])
        request = request_type(**blank_values(request_type, ErrorCode.none) | {"topics": ()})
        answer = _ask(
            sock,
            server,
            request,
            load_response_schema(METADATA, known[-1]),
            "Metadata",
            sasl_hint=True,
        )
        return len(answer.brokers)


def _ask(
    sock: socket.socket,
    server: HostPort,
    request: Any,
    response_type: Any,
    api: str,
    *,
    sasl_hint: bool = False,
) -> Any:
    try:
        sock.sendall(encode_request(request, 1, "eoslab-front"))
        prefix = _read(sock, SIZE_PREFIX.size)
        if prefix[0] in TLS_RECORD_TYPES and prefix[1] == 0x03:
            raise BootstrapError(
                f"{server}: answers in TLS; TLS is out of scope (give a plaintext listener)"
            )
        (size,) = SIZE_PREFIX.unpack(prefix)
        if not 0 < size <= MAX_ANSWER:
            raise BootstrapError(f"{server}: not Kafka (a {api} answer of {size} bytes)")
        return decode_response(_read(sock, size), response_type)
    except (ConnectionError, TimeoutError, EOFError) as error:
        why = f"closed the connection on {api}" if isinstance(error, EOFError) else str(error)
        hint = " (a listener that wants SASL? SASL is out of scope)" if sasl_hint else ""
        raise BootstrapError(f"{server}: not Kafka or not plaintext: {why}{hint}") from None
    except (SerialError, UnicodeError, IndexError) as error:
        raise BootstrapError(f"{server}: not Kafka (its {api} answer: {error})") from None


def _read(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)
