"""Start, signal and stop the lab's processes.

Each service runs in a session (process group) of its own, so a signal reaches everything it
started, and carries EOSLAB_LAB_MEMBER=<lab folder> in its environment: `processes_of(lab)` can then find
every process of a lab even when its state file is gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from contextlib import suppress
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from eoslab.clock import wait_until
from eoslab.settings import LAB_MEMBER

MARKER = LAB_MEMBER  # set only in the services' environment, never by users


@dataclass(frozen=True)
class ProcessRecord:
    """What the state file remembers of a started service."""

    name: str
    pid: int
    create_time: float
    argv: list[str]
    log: str

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    def process(self) -> psutil.Process | None:
        """The live process, or None when it is gone (or its pid was reused)."""
        try:
            process = psutil.Process(self.pid)
            if abs(process.create_time() - self.create_time) > 0.01:
                return None
            if process.status() == psutil.STATUS_ZOMBIE:
                process.wait(0)
                return None
            return process
        except (psutil.NoSuchProcess, psutil.TimeoutExpired):
            return None

    def alive(self) -> bool:
        return self.process() is not None

    def paused(self) -> bool:
        process = self.process()
        return process is not None and process.status() == psutil.STATUS_STOPPED


def spawn(
    name: str,
    argv: list[str],
    log: Path,
    lab: Path,
    *,
    env: dict[str, str],
    user: str | None = None,
) -> ProcessRecord:
    """Start a service in a session of its own (as ``user`` when given), logging to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    environment = {**os.environ, **env, MARKER: str(lab)}
    with log.open("ab") as out:
        out.write(f"\n=== eoslab: starting {name}: {' '.join(argv)}\n".encode())
        out.flush()
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=environment,
            cwd=lab,
            user=user,
            extra_groups=[] if user else None,
        )
    _children[child.pid] = child
    return ProcessRecord(name, child.pid, psutil.Process(child.pid).create_time(), argv, str(log))


# Popen objects of the processes this interpreter started: polled so that a killed child
# does not linger as a zombie while a long-lived caller (a test session) runs on.
_children: dict[int, subprocess.Popen[bytes]] = {}


def signal_group(record: ProcessRecord, signum: signal.Signals) -> bool:
    """Send a signal to the service's process group; False when it is not running."""
    if record.process() is None:
        return False
    try:
        os.killpg(record.pid, signum)
    except ProcessLookupError:
        return False
    return True


def terminate(record: ProcessRecord) -> bool:
    """Ask for a clean shutdown (a paused process is resumed first, or it could not act)."""
    if record.paused():
        signal_group(record, signal.SIGCONT)
    return signal_group(record, signal.SIGTERM)


def stop(record: ProcessRecord, grace_s: float) -> None:
    """SIGTERM, then SIGKILL after the grace period; returns when the group is gone. The
    SIGKILL goes to what is left of the group even when its leader has ended: a member that
    outlived the SIGTERM (an Airflow scheduler's LocalExecutor worker, left running by a
    `make down` of 2026-12-07) is the service's still (a live member keeps the group's id from
    being reused)."""
    if terminate(record) and not wait_gone(record, grace_s):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(record.pid, signal.SIGKILL)
        wait_gone(record, 10.0)
    _reap(record.pid)


def kill(record: ProcessRecord) -> None:
    """kill -9, as a crash: no shutdown hook runs."""
    signal_group(record, signal.SIGKILL)
    wait_gone(record, 10.0)
    _reap(record.pid)


def wait_gone(record: ProcessRecord, timeout_s: float) -> bool:
    def gone() -> bool:
        _reap(record.pid)
        return record.process() is None and not _group_alive(record.pid)

    return bool(wait_until(gone, timeout_s, interval_s=0.1))


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return any(
        _pgid(p) == pgid and p.status() != psutil.STATUS_ZOMBIE for p in psutil.process_iter()
    )


def _pgid(process: psutil.Process) -> int | None:
    try:
        return os.getpgid(process.pid)
    except (ProcessLookupError, psutil.NoSuchProcess):
        return None


def _reap(pid: int) -> None:
    child = _children.get(pid)
    if child is not None and child.poll() is not None:
        del _children[pid]


def processes_of(lab: Path, *, within: bool = False) -> list[psutil.Process]:
    """Every live process started for this lab folder (``within``: for it or any lab folder
    under it), found by the marker in its environment."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            marker = process.environ().get(MARKER)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if marker == str(lab) or (within and marker and Path(marker).is_relative_to(lab)):
            found.append(process)
    return found


def kill_left_behind(root: Path) -> list[str]:
    """Kill every process of the labs under ``root`` that is still running (a test session
    that died before its labs' teardown: their ports would refuse the next one's labs); the
    command names of those killed."""
    killed = []
    for process in processes_of(root, within=True):
        with suppress(psutil.NoSuchProcess):
            name = process.name()
            process.kill()
            killed.append(name)
    return killed
