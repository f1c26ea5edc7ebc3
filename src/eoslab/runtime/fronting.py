"""The fronting proxy of an external run: ``eoslab chaos front`` in front of the user's cluster,
started by the run with proxy faults in its timeline and stopped when the run ends. Its clients
get the proxy's bootstrap; its nemesis, the proxy's control API."""

from __future__ import annotations

import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Self

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0


class FrontingError(RuntimeError):
    """The fronting proxy did not start; the message is its own one line (a bootstrap that is
    not reachable or not Kafka)."""


@dataclass
class FrontingProxy:
    process: subprocess.Popen[str]
    control_url: str
    bootstrap: str
    """The proxy's bootstrap: what the run's clients are given."""

    @classmethod
    def start(cls, bootstrap: str, log: Path, fault_log: Path, seed: int) -> Self:
        """Start the proxy in front of ``bootstrap``; its stderr goes to ``log``. FrontingError
        with its last line when it exits or stays silent instead of saying it is ready."""
        argv = [sys.executable, "-m", "eoslab.proxy.command", "front", "--bootstrap", bootstrap]
        argv += ["--fault-log", str(fault_log), "--seed", str(seed)]
        with log.open("a") as errors:
            process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, text=True
            )
        assert process.stdout is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        line = ""
        while not line and time.monotonic() < deadline:
            readable, _, _ = select.select([process.stdout], [], [], 0.5)
            if readable:
                line = process.stdout.readline() or "exited"
        fields = dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
        if not line.startswith("ready") or {"control", "bootstrap"} - set(fields):
            _stop(process)
            said = [text for text in log.read_text().splitlines() if text.strip()]
            raise FrontingError(
                said[-1].removeprefix("error: ")
                if said
                else f"the fronting proxy did not start: {line}"
            )
        return cls(process, fields["control"], fields["bootstrap"])

    def stop(self) -> None:
        _stop(self.process)


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stdout is not None:
        process.stdout.close()
