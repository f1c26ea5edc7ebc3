"""Building a driver program once per client version: a folder under ``.venv-clients/``, a stamp
newer than the program's sources when the build is complete, a file lock so that two runs
starting at once build it once, and the build's failure said in one line."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from eoslab.clients import CLIENTS_DIR, ClientError
from eoslab.settings import project_root

BUILD_TIMEOUT_S = 600.0
STAMP = ".built"


def clients_dir() -> Path:
    """Where client builds and older librdkafka releases are kept (ignored by git)."""
    return project_root() / CLIENTS_DIR


class Build:
    """One client version's build folder."""

    def __init__(self, folder: Path, *, inputs: Path | None, what: str) -> None:
        self.folder = folder
        self.inputs = inputs
        self.what = what

    @property
    def fresh(self) -> bool:
        stamp = self.folder / STAMP
        if not stamp.exists():
            return False
        built = stamp.stat().st_mtime
        if self.inputs is None:
            return True
        return all(
            path.stat().st_mtime <= built
            for path in self.inputs.rglob("*")
            if path.is_file() and "target" not in path.parts
        )

    def ensure(
        self,
        command: Callable[[], list[str]],
        say: Callable[[str], None],
        failure: Callable[[str], str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        """Build with ``command`` unless a complete build is there (one line said when it
        builds); ClientError with ``failure``'s line (or the output's last line) if it fails."""
        if self.fresh:
            return
        self.folder.parent.mkdir(parents=True, exist_ok=True)
        with (self.folder.parent / f".{self.folder.name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.fresh:
                return
            say(f"building {self.what} (once per version: {self.folder})")
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder.mkdir(parents=True)
            try:
                done = subprocess.run(
                    command(),
                    capture_output=True,
                    text=True,
                    timeout=BUILD_TIMEOUT_S,
                    cwd=cwd or project_root(),
                    check=False,
                )
            except subprocess.TimeoutExpired:
                raise ClientError(f"building {self.what} took over {BUILD_TIMEOUT_S:g} s") from None
            if done.returncode != 0:
                output = done.stdout + done.stderr
                shutil.rmtree(self.folder, ignore_errors=True)
                if failure is not None:
                    raise ClientError(failure(output))
                last = [line for line in output.splitlines() if line.strip()]
                raise ClientError(
                    f"building {self.what} failed: {last[-1] if last else 'no output'}"
                )
            (self.folder / STAMP).touch()
