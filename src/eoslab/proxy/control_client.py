"""A client of a running proxy's control API, for the nemesis, the CLI and tests (stdlib only)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from eoslab.control.http import JsonControlClient
from eoslab.settings import HOST, BasePort


class ProxyControl(JsonControlClient):
    def __init__(
        self, url: str = f"http://{HOST}:{BasePort.PROXY_CONTROL.value}", timeout_s: float = 10.0
    ) -> None:
        super().__init__(url, timeout_s)

    def add(self, spec: BaseModel | dict[str, Any]) -> str:
        """Add a fault; its id."""
        body = (
            spec.model_dump(mode="json", exclude_none=True) if isinstance(spec, BaseModel) else spec
        )
        return str(self.call("POST", "/faults", body)["id"])

    def fault(self, fault_id: str) -> dict[str, Any]:
        """One fault as listed, with its evidence (FaultEvidence's fields)."""
        return self.call("GET", f"/faults/{fault_id}")

    def remove(self, fault_id: str) -> None:
        self.call("DELETE", f"/faults/{fault_id}")

    def clear(self) -> None:
        self.call("DELETE", "/faults")

    def faults(self) -> list[dict[str, Any]]:
        return self.call("GET", "/faults")

    def counters(self) -> dict[str, Any]:
        return self.call("GET", "/counters")

    def log(self) -> list[dict[str, Any]]:
        return self.call("GET", "/log")
