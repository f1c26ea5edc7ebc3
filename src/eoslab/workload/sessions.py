"""A workload session as an OS process (a producer or a consumer): its own process so that a
nemesis can kill -9 it as a real crash or SIGSTOP it as a zombie.

The process gets its spec as one JSON argument and prints one JSON progress line now and then
on stdout; a reader thread keeps the last one and, once the process has exited, runs the
supervisor's ``on_exit`` (end time, settling what a killed session left behind).

Each session leads a process group of its own: a client driver program (Java, franz-go) is its
child, and a kill -9, a SIGSTOP or a SIGCONT of the session reaches both at once, as it would
reach one application process. Signals a session handles itself (SIGTERM, the arming signals)
go to the session alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from eoslab.clients import ClientLaunch

GROUP_SIGNALS = frozenset({signal.SIGKILL, signal.SIGSTOP, signal.SIGCONT})
"""What reaches the session's whole process group (its driver program too)."""


class SessionRecord(Protocol):
    """What run.json keeps of a session (SessionInfo, ConsumerSessionInfo)."""

    session_id: str


Info = TypeVar("Info", bound=SessionRecord)


class SessionProcess:
    def __init__(
        self,
        module: str,
        spec_json: str,
        log: Path,
        on_exit: Callable[[SessionProcess], None],
        client: ClientLaunch | None = None,
    ) -> None:
        self.progress: dict[str, Any] = {}
        self.killed = False
        """Ended by a kill -9 on purpose (a crash the nemesis asked for, not a failure)."""
        self.stopped = False
        """Asked to end (SIGTERM): dying of it before its handler is in place is no failure."""
        self._on_exit = on_exit
        with log.open("wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", module, spec_json],
                stdout=subprocess.PIPE,
                stderr=stderr,
                stdin=subprocess.DEVNULL,
                env=None if client is None else client.environment(dict(os.environ)),
                start_new_session=True,
            )
        self._reader = threading.Thread(target=self._read, name=f"progress-{module}", daemon=True)
        self._reader.start()

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    @property
    def finished(self) -> bool:
        """Exited, and its last progress line and on_exit are taken care of."""
        return not self.running and not self._reader.is_alive()

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    @property
    def crashed_on_purpose(self) -> bool:
        """Killed itself (-9) at its planted crash point (its last progress state "crashing")."""
        return (
            self.process.returncode == -signal.SIGKILL and self.progress.get("state") == "crashing"
        )

    @property
    def failed(self) -> bool:
        """Exited abnormally, and not on purpose: neither killed nor stopped by its supervisor,
        nor crashed at its own planted crash point (its last progress state "crashing")."""
        code = self.process.returncode
        if code in (None, 0) or self.killed:
            return False
        if self.stopped and code in (-signal.SIGTERM, -signal.SIGKILL):
            return False
        return not self.crashed_on_purpose

    def signal(self, signum: signal.Signals) -> None:
        if not self.running:
            return
        if signum in GROUP_SIGNALS:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signum)
        else:
            self.process.send_signal(signum)

    def kill(self, timeout_s: float) -> None:
        """kill -9 of the session and its driver program, as a crash; returns once on_exit has
        run."""
        self.killed = True
        self.signal(signal.SIGKILL)
        self.process.wait(timeout=timeout_s)
        self._reader.join(timeout=timeout_s)

    def join(self, timeout_s: float) -> None:
        self._reader.join(timeout=timeout_s)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                self.progress = json.loads(line)
            except ValueError:
                continue
        self.process.wait()
        self._on_exit(self)


@dataclass
class Session(Generic[Info]):
    """A supervisor's record of one session: what run.json says of it, and its process."""

    info: Info
    process: SessionProcess


def stop_all(sessions: Iterable[SessionProcess], grace_s: float) -> None:
    """SIGTERM every running session (a paused one is resumed first, or it could not act);
    SIGKILL what is left after the grace."""
    running = [s for s in sessions if s.running]
    for session in running:
        session.stopped = True
        session.signal(signal.SIGCONT)
        session.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for session in running:
        try:
            session.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            session.signal(signal.SIGKILL)
            session.process.wait()
    for session in running:
        session.join(grace_s)


class SessionTable(Generic[Info]):
    """A supervisor's sessions: for each worker index (producer 0..P-1, consumer 0..C-1), its
    sessions oldest first, a new one on every (re)start. Thread-safe: the nemesis starts and
    kills sessions while the run watches them."""

    def __init__(self, who: str, workers: int, error: type[Exception]) -> None:
        self._who = who
        self._error = error
        self._sessions: dict[int, list[Session[Info]]] = {i: [] for i in range(workers)}
        self._lock = threading.Lock()

    def all(self) -> list[Session[Info]]:
        with self._lock:
            return [s for sessions in self._sessions.values() for s in sessions]

    def of(self, worker: int) -> list[Session[Info]]:
        """The worker's sessions so far (raises the supervisor's error for an unknown one)."""
        with self._lock:
            if worker not in self._sessions:
                known = f"{self._who}s: 0..{len(self._sessions) - 1}"
                raise self._error(f"no {self._who} {worker} ({known})")
            return list(self._sessions[worker])

    def current(self, worker: int) -> Session[Info] | None:
        sessions = self.of(worker)
        return sessions[-1] if sessions else None

    def current_by_worker(self) -> list[tuple[int, Session[Info]]]:
        """Each worker's latest session, with its index (workers never started left out)."""
        with self._lock:
            return [(w, sessions[-1]) for w, sessions in self._sessions.items() if sessions]

    def add(self, worker: int, session: Session[Info]) -> None:
        with self._lock:
            self._sessions[worker].append(session)

    def new_worker(self) -> int:
        """One more worker index (a consumer joining the group)."""
        with self._lock:
            worker = len(self._sessions)
            self._sessions[worker] = []
            return worker

    def failures(self) -> list[str]:
        """Sessions that exited abnormally, not on purpose (see SessionProcess.failed)."""
        with self._lock:
            pairs = [(w, s) for w, sessions in self._sessions.items() for s in sessions]
        return [
            f"{self._who} {worker} session {session.info.session_id} exited "
            f"{session.process.returncode}"
            for worker, session in pairs
            if session.process.failed
        ]
