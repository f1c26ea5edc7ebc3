"""What a lab runtime is: the verbs both runtimes (local processes, docker compose) offer, so
the CLI, the nemesis and the orchestration work unchanged on either."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from eoslab.runtime.status import LabStatus
from eoslab.runtime.topology import LabConfig


class ProcessState(StrEnum):
    RUNNING = "running"
    STOPPED = "stopped"
    """Frozen by SIGSTOP (a paused container)."""
    DEAD = "dead"


@dataclass(frozen=True)
class ProcessObservation:
    """A service's process as seen now: the nemesis' evidence that a kill, pause or restart
    took effect."""

    pid: int | None
    """None when no process runs (or the runtime does not expose one)."""
    state: ProcessState


class ProcessFaults(Protocol):
    """The verbs the nemesis breaks services with, and how it sees what they did."""

    def observe(self, name: str) -> ProcessObservation:
        """The service's process now."""
        ...

    def kill(self, name: str) -> None:
        """kill -9: the service dies without shutdown."""
        ...

    def pause(self, name: str) -> None:
        """SIGSTOP: frozen, its sockets open."""
        ...

    def resume(self, name: str) -> None: ...

    def restart(self, name: str) -> None:
        """Stop (gracefully when it runs) and start again with the same config and data."""
        ...


class LabRuntime(ProcessFaults, Protocol):
    name: str
    config: LabConfig

    def up(self) -> LabStatus: ...
    def down(self, purge: bool = False) -> None: ...
    def status(self) -> LabStatus: ...
    def logs(self, name: str, lines: int = 50) -> str: ...
