"""Bring the lab up and down: local processes (default) or docker compose.

Both runtimes implement :class:`~eoslab.runtime.lab.LabRuntime` (up, down, status, logs, kill,
pause, resume, restart), so the nemesis works unchanged on either.
"""

from __future__ import annotations

from pathlib import Path

from eoslab.runtime.lab import LabRuntime
from eoslab.runtime.status import LabError
from eoslab.runtime.topology import COMPOSE_RECORD, LabConfig
from eoslab.settings import RUNTIMES, runtime_name


def get_runtime(name: str | None = None, config: LabConfig | None = None) -> LabRuntime:
    """The runtime called ``name`` (default: $EOSLAB_RUNTIME, else local)."""
    name = name or runtime_name()
    if name == "local":
        from eoslab.runtime.local import LocalRuntime

        return LocalRuntime(config)
    if name == "compose":
        from eoslab.runtime.compose import ComposeRuntime

        return ComposeRuntime(config)
    raise LabError(f"unknown runtime {name!r}; choose one of: {', '.join(RUNTIMES)}")


def compose_lab_in(state_dir: Path) -> bool:
    """Whether the compose runtime brought a lab up in this folder (and not down yet)."""
    return (state_dir / COMPOSE_RECORD).is_file()


__all__ = ["LabConfig", "LabError", "LabRuntime", "compose_lab_in", "get_runtime"]
