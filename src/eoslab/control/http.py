"""JSON over HTTP/1.1 on loopback: the control API server of the lab's services, and its client.

The server runs inside the service's own asyncio loop, so a control call is atomic with respect
to the traffic the service handles (a fault lands between two requests, never inside one).
It is written on asyncio streams rather than mounted on Starlette/uvicorn: uvicorn's
``Server.serve()`` captures SIGINT/SIGTERM for itself, which would fight the services' own
graceful shutdown, and a handful of JSON routes need no framework. Each request is answered
and its connection closed; oversized or malformed requests get a 400 and nothing else happens.

Routes are ``(method, "/faults/{fault_id}")`` → ``handler(params, body)``; a handler returns
the JSON answer or raises :class:`HttpError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import urllib.error
import urllib.request
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

MAX_HEADER_BYTES = 16 * 1024
MAX_BODY_BYTES = 1024 * 1024
READ_TIMEOUT_S = 10.0

Handler = Callable[[dict[str, str], bytes], object]
"""(path parameters, request body) -> the JSON-serialisable answer."""


class HttpError(Exception):
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def json_object(body: bytes) -> dict[str, Any]:
    """The request body as a JSON object, or a 400 saying why not."""
    try:
        value = json.loads(body or b"null")
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise HttpError(HTTPStatus.BAD_REQUEST, f"body is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise HttpError(HTTPStatus.BAD_REQUEST, "body must be a JSON object")
    return value


class JsonHttpServer:
    def __init__(self, name: str, routes: dict[tuple[str, str], Handler]) -> None:
        self.name = name
        self._routes = [
            (method, [part for part in pattern.split("/") if part], handler)
            for (method, pattern), handler in routes.items()
        ]
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> None:
        try:
            self._server = await asyncio.start_server(
                self._serve, host, port, limit=MAX_HEADER_BYTES
            )
        except OSError as error:
            raise OSError(
                error.errno, f"{self.name}: cannot listen on {host}:{port}: {error.strerror}"
            ) from error

    @property
    def port(self) -> int:
        """The bound port (the actual one when asked for port 0)."""
        assert self._server is not None, "not started"
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    def route(self, method: str, path: str, body: bytes) -> object:
        """Answer one request (raises HttpError for 4xx); separate from the socket for tests."""
        parts = [part for part in path.split("?", 1)[0].split("/") if part]
        allowed = False
        for route_method, pattern, handler in self._routes:
            params = _match(pattern, parts)
            if params is None:
                continue
            if route_method == method:
                return handler(params, body)
            allowed = True
        if allowed:
            raise HttpError(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} not allowed on {path}")
        raise HttpError(HTTPStatus.NOT_FOUND, f"no endpoint {path}")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, path, body = await asyncio.wait_for(_read_request(reader), READ_TIMEOUT_S)
            status, answer = HTTPStatus.OK, self.route(method, path, body)
        except HttpError as error:
            status, answer = error.status, {"error": str(error)}
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            status, answer = HTTPStatus.BAD_REQUEST, {"error": "incomplete or oversized request"}
        except ConnectionError:
            writer.close()
            return
        payload = json.dumps(answer, default=str).encode()
        head = (
            f"HTTP/1.1 {status.value} {status.phrase}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n"
            "Connection: close\r\n\r\n"
        )
        with contextlib.suppress(ConnectionError):
            writer.write(head.encode() + payload)
            await writer.drain()
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


def _match(pattern: list[str], parts: list[str]) -> dict[str, str] | None:
    if len(pattern) != len(parts):
        return None
    params = {}
    for expected, actual in zip(pattern, parts, strict=True):
        if expected.startswith("{") and expected.endswith("}"):
            params[expected[1:-1]] = actual
        elif expected != actual:
            return None
    return params


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    request_line = lines[0].split(" ")
    if len(request_line) != 3 or not request_line[2].startswith("HTTP/1."):
        raise HttpError(HTTPStatus.BAD_REQUEST, f"malformed request line {lines[0]!r}")
    method, path, _ = request_line
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            if not value.strip().isdigit():
                raise HttpError(HTTPStatus.BAD_REQUEST, "Content-Length is not a number")
            length = int(value.strip())
    if length > MAX_BODY_BYTES:
        raise HttpError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {MAX_BODY_BYTES} bytes")
    body = await reader.readexactly(length) if length else b""
    return method.upper(), path, body


class ControlError(RuntimeError):
    """A control API refused a call; ``status`` is the HTTP status, the message its reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class JsonControlClient:
    """A client of a control API (stdlib only: the nemesis, the CLI and tests use it)."""

    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self._timeout_s = timeout_s

    def call(self, method: str, path: str, body: object = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
                return json.load(response)
        except urllib.error.HTTPError as error:
            raise ControlError(error.code, f"{method} {path}: {_reason(error)}") from None


def _reason(error: urllib.error.HTTPError) -> str:
    try:
        return str(json.load(error)["error"])
    except (ValueError, KeyError, TypeError):
        return str(error.reason)


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT: how the lab's services are told to stop gracefully.
    Call it before the service says it is ready, so that no signal finds it unprepared."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return stop
