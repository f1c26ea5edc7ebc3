"""A client of a running reference broker's control API (see control.py)."""

from __future__ import annotations

from typing import Any

from eoslab.control.http import JsonControlClient


class RefbrokerControl(JsonControlClient):
    def apply(self, fault: dict[str, Any]) -> dict[str, Any]:
        """Apply one fault now (a JSON object with a `kind`, see faults.py)."""
        return self.call("POST", "/faults", fault)

    def clear(self) -> dict[str, Any]:
        """Back to the broker as configured: request faults disarmed, rules and the
        duplicate-cache size as the broker was started with."""
        return self.call("DELETE", "/faults")

    def state(self) -> dict[str, Any]:
        return self.call("GET", "/faults")

    def counters(self) -> dict[str, Any]:
        return self.call("GET", "/counters")

    def log(self) -> list[dict[str, Any]]:
        return self.call("GET", "/log")
