"""JSON over HTTP to the lab's control APIs (chaos proxy, reference broker), stdlib only."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


class ControlError(RuntimeError):
    """A control API refused a call; `status` is the HTTP status, the message its reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class JsonControlClient:
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
        return json.load(error)["error"]
    except (ValueError, KeyError, TypeError):
        return str(error.reason)
