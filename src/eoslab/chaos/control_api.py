"""The proxy's control API: JSON over a minimal HTTP/1.1 server on asyncio.

Five endpoints, one client at a time in practice (the nemesis, a test, the CLI): a web
framework would add a dependency and a second event loop model for nothing. Each request
is answered and the connection closed.

    POST   /faults        a fault spec → {"id": "f1"}       (400 names the invalid field)
    GET    /faults        [{"id", "spec", "matched", "injected", "exhausted"}, ...]
    DELETE /faults/<id>   remove one fault                  (404 if unknown)
    DELETE /faults        remove all faults
    GET    /counters      {"routes": {route: {...}}, "faults": {id: {"matched", "injected"}}}
    GET    /log           the fault log entries
"""

import asyncio
import contextlib
import json
from http import HTTPStatus

from eoslab.chaos.fault_spec import FaultSpecError
from eoslab.chaos.server import ChaosProxy

DEFAULT_CONTROL = "127.0.0.1:8474"
MAX_HEADER_BYTES = 16 * 1024
MAX_BODY_BYTES = 1024 * 1024
READ_TIMEOUT_S = 10.0


class HttpError(Exception):
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class ControlApi:
    def __init__(self, proxy: ChaosProxy, host: str, port: int) -> None:
        self._proxy = proxy
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(
                self._serve, self._host, self._port, limit=MAX_HEADER_BYTES
            )
        except OSError as error:
            raise OSError(
                error.errno,
                f"control API: cannot listen on {self._host}:{self._port}: {error.strerror}",
            ) from error

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, path, body = await asyncio.wait_for(_read_request(reader), READ_TIMEOUT_S)
            status, answer = HTTPStatus.OK, self._route(method, path, body)
        except HttpError as error:
            status, answer = error.status, {"error": str(error)}
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            status, answer = HTTPStatus.BAD_REQUEST, {"error": "incomplete or oversized request"}
        except ConnectionError:
            return
        payload = json.dumps(answer).encode()
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

    def _route(self, method: str, path: str, body: bytes) -> object:
        proxy = self._proxy
        parts = [part for part in path.split("?", 1)[0].split("/") if part]
        match method, parts:
            case "POST", ["faults"]:
                try:
                    fault = proxy.add_fault(_json_object(body))
                except FaultSpecError as error:
                    raise HttpError(HTTPStatus.BAD_REQUEST, str(error)) from None
                return {"id": fault.id}
            case "GET", ["faults"]:
                return [fault.describe() for fault in proxy.faults]
            case "DELETE", ["faults"]:
                proxy.faults.clear()
                return {"removed": "all"}
            case "DELETE", ["faults", fault_id]:
                if not proxy.faults.remove(fault_id):
                    raise HttpError(HTTPStatus.NOT_FOUND, f"no fault {fault_id!r}")
                return {"removed": fault_id}
            case "GET", ["counters"]:
                return {
                    "routes": proxy.counters.snapshot(),
                    "faults": {
                        fault.id: {
                            "kind": fault.kind,
                            "matched": fault.matched,
                            "injected": fault.injected,
                        }
                        for fault in proxy.faults
                    },
                }
            case "GET", ["log"]:
                return proxy.fault_log.entries()
            case _, ["faults"] | ["faults", _] | ["counters"] | ["log"]:
                raise HttpError(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} not allowed on {path}")
            case _:
                raise HttpError(HTTPStatus.NOT_FOUND, f"no endpoint {path}")


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
    return method, path, body


def _json_object(body: bytes) -> dict[str, object]:
    try:
        value = json.loads(body or b"null")
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise HttpError(HTTPStatus.BAD_REQUEST, f"body is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise HttpError(HTTPStatus.BAD_REQUEST, "body must be a JSON object (a fault spec)")
    return value
