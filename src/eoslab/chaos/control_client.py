"""A client of a running proxy's control API, for the nemesis, the CLI and tests (stdlib only)."""

import json
import urllib.error
import urllib.request
from typing import Any

from pydantic import BaseModel

from eoslab.chaos.control_api import DEFAULT_CONTROL


class ProxyControlError(RuntimeError):
    """The control API refused a call; `status` is the HTTP status, the message its reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class ProxyControl:
    def __init__(self, url: str = f"http://{DEFAULT_CONTROL}", timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self._timeout_s = timeout_s

    def add(self, spec: BaseModel | dict[str, Any]) -> str:
        """Add a fault; its id."""
        body = (
            spec.model_dump(mode="json", exclude_none=True) if isinstance(spec, BaseModel) else spec
        )
        return self._call("POST", "/faults", body)["id"]

    def remove(self, fault_id: str) -> None:
        self._call("DELETE", f"/faults/{fault_id}")

    def clear(self) -> None:
        self._call("DELETE", "/faults")

    def faults(self) -> list[dict[str, Any]]:
        return self._call("GET", "/faults")

    def counters(self) -> dict[str, Any]:
        return self._call("GET", "/counters")

    def log(self) -> list[dict[str, Any]]:
        return self._call("GET", "/log")

    def _call(self, method: str, path: str, body: object = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
                return json.load(response)
        except urllib.error.HTTPError as error:
            raise ProxyControlError(error.code, _reason(error)) from None


def _reason(error: urllib.error.HTTPError) -> str:
    try:
        return json.load(error)["error"]
    except (ValueError, KeyError, TypeError):
        return str(error.reason)
