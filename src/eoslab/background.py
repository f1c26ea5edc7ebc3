"""Work that runs beside something else on a daemon thread: the soak's load and committers
beside the frames and the kills, a nemesis step's watch beside its fault."""

from __future__ import annotations

import abc
import threading
from typing import ClassVar


class Background(abc.ABC):
    """Runs ``_run`` on a daemon thread from ``start()`` until ``stop()`` sets ``_stop``;
    ``_lock`` guards what the thread and the soak both read."""

    thread_name: ClassVar[str] = "background"
    join_timeout_s: ClassVar[float | None] = None

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)

    @abc.abstractmethod
    def _run(self) -> None:
        """The thread's work, until ``_stop`` is set."""

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.join_timeout_s)
