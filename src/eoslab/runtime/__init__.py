"""Bring the lab up and down: local processes (default) or docker compose.

Both runtimes offer the same verbs (up, down, status, logs, kill, pause, resume, restart), so
the nemesis works unchanged on either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslab.runtime.status import LabError
from eoslab.runtime.topology import LabConfig

if TYPE_CHECKING:
    from eoslab.runtime.compose import ComposeRuntime
    from eoslab.runtime.local import LocalRuntime

RUNTIMES = ("local", "compose")


def get_runtime(
    name: str = "local", config: LabConfig | None = None
) -> LocalRuntime | ComposeRuntime:
    if name == "local":
        from eoslab.runtime.local import LocalRuntime

        return LocalRuntime(config)
    if name == "compose":
        from eoslab.runtime.compose import ComposeRuntime

        return ComposeRuntime(config)
    raise LabError(f"unknown runtime {name!r}; choose one of: {', '.join(RUNTIMES)}")


__all__ = ["RUNTIMES", "LabConfig", "LabError", "get_runtime"]
