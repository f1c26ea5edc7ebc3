"""A PostgreSQL server for the consumer workload's sink: a cluster of its own in a folder.

Debian's PostgreSQL server (package ``postgresql``: ``initdb`` and ``postgres`` under
``/usr/lib/postgresql/<version>/bin``), not a pip-installed one: it is the server users run,
and `make setup` installs it with apt like the other system tools.

The server listens on 127.0.0.1 only (no Unix socket) and asks for a password: a random
one, generated at ``init`` and kept in ``<folder>/password`` (mode 0600); there is no
default password. PostgreSQL refuses to run as root, so as root both ``initdb`` and
``postgres`` run as the unprivileged user ``nobody``, who then owns the data folder; every
folder above it must be open to others (o+x), e.g. a folder under /tmp.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
from pathlib import Path

import psycopg
from psycopg import sql

from eoslab.clock import wait_until
from eoslab.runtime.topology import HOST, LabConfig
from eoslab.settings import BasePort

SUPERUSER = "eoslab"
AUTH_METHOD = "scram-sha-256"
INITDB_OPTIONS = (f"--auth={AUTH_METHOD}", "--encoding=UTF8", "--locale=C")
"""How the cluster is created, beside its folder, superuser and password (the compose
runtime's server is created alike)."""
SERVER_SETTINGS = {"max_connections": "50"}
"""``-c`` settings of the server beside its address (the compose runtime's server has them)."""
UNPRIVILEGED_USER = "nobody"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
DEBIAN_BINARIES = Path("/usr/lib/postgresql")


class PostgresError(RuntimeError):
    """The server could not be set up, started or reached; the message says why."""


def ensure_password(path: Path) -> str:
    """The server's password, kept in ``path`` (mode 0600): generated the first time."""
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_hex(16) + "\n")
        path.chmod(0o600)
    return path.read_text().strip()


def binaries() -> Path:
    """The folder with ``initdb`` and ``postgres``: on PATH, else Debian's newest version."""
    on_path = shutil.which("postgres")
    if on_path and shutil.which("initdb"):
        return Path(on_path).resolve().parent
    versions = sorted(
        (p for p in DEBIAN_BINARIES.glob("*/bin") if (p / "postgres").is_file()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if not versions:
        raise PostgresError(
            "PostgreSQL server binaries not found (initdb, postgres); install Debian's "
            "server: apt-get install postgresql (make setup does it as root)"
        )
    return versions[-1]


class PostgresServer:
    """``<root>/data`` (the cluster), ``<root>/password``, ``<root>/postgres.log``."""

    def __init__(self, root: Path, port: int, host: str = HOST) -> None:
        self.root = Path(root).resolve()
        self.port = port
        self.host = host
        self.data_dir = self.root / "data"
        self.log = self.root / "postgres.log"
        self.password_file = self.root / "password"
        self._process: subprocess.Popen[bytes] | None = None
        self._as = UNPRIVILEGED_USER if os.geteuid() == 0 else None

    def url(self, database: str = "postgres") -> str:
        password = self.password_file.read_text().strip()
        return f"postgresql://{SUPERUSER}:{password}@{self.host}:{self.port}/{database}"

    # ---------------------------------------------------------------- lifecycle
    def init(self) -> None:
        """Create the cluster (once: an existing one is kept, with its password)."""
        if (self.data_dir / "PG_VERSION").is_file():
            return
        self._check_reachable()
        password = ensure_password(self.password_file)
        self.data_dir.mkdir(mode=0o700)
        pwfile = self.root / ".initdb-password"
        pwfile.write_text(password + "\n")
        self._give_away(self.data_dir, pwfile)
        try:
            done = subprocess.run(
                [
                    str(binaries() / "initdb"),
                    f"--pgdata={self.data_dir}",
                    f"--username={SUPERUSER}",
                    f"--pwfile={pwfile}",
                    *INITDB_OPTIONS,
                    "--no-instructions",
                ],
                capture_output=True,
                timeout=120,
                user=self._as,
                extra_groups=[] if self._as else None,
                check=False,
            )
        finally:
            pwfile.unlink()
        if done.returncode != 0:
            raise PostgresError(f"initdb failed: {done.stderr.decode(errors='replace')[-2000:]}")

    @property
    def run_as(self) -> str | None:
        """The user the server runs as: ``nobody`` when we are root (PostgreSQL refuses root)."""
        return self._as

    def command(self) -> list[str]:
        """The server's command line: loopback, no Unix socket (the lab runtime starts it so)."""
        return [
            str(binaries() / "postgres"),
            "-D",
            str(self.data_dir),
            "-h",
            self.host,
            "-p",
            str(self.port),
            "-c",
            "unix_socket_directories=",
            *(arg for key, value in SERVER_SETTINGS.items() for arg in ("-c", f"{key}={value}")),
        ]

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Start the server and wait (bounded) until it accepts a login."""
        self.init()
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                user=self._as,
                extra_groups=[] if self._as else None,
            )
        process = self._process
        if (
            not wait_until(
                lambda: process.poll() is not None or self.accepts_login(), timeout_s, 0.2
            )
            or process.poll() is not None
        ):
            self.stop()
            raise PostgresError(
                f"PostgreSQL on {self.host}:{self.port} did not come up within {timeout_s} s; "
                f"its log ({self.log}) ends with:\n{self._log_tail()}"
            )

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Fast shutdown (SIGINT: sessions are ended, work is checkpointed); kill -9 after."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=timeout_s)

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    # ---------------------------------------------------------------- databases
    def create_database(self, name: str) -> str:
        """A new empty database; returns its URL."""
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as connection:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    # ---------------------------------------------------------------- internals
    def accepts_login(self) -> bool:
        try:
            with psycopg.connect(self.url(), connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def _check_reachable(self) -> None:
        """As root the server runs as nobody, who must be able to walk down to its folder."""
        if self._as is None:
            return
        existing = [self.root] if self.root.exists() else []
        for folder in [*existing, *self.root.parents]:
            if not folder.stat().st_mode & 0o001:
                raise PostgresError(
                    f"{folder} is closed to others, so user {self._as} cannot reach "
                    f"{self.root}; put the server's folder under one open to all (e.g. /tmp)"
                )

    def _give_away(self, *paths: Path) -> None:
        if self._as is not None:
            for path in paths:
                shutil.chown(path, user=self._as)

    def _log_tail(self, lines: int = 20) -> str:
        if not self.log.is_file():
            return "(no log)"
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


LAB_SINK = "lab"
"""``--sink lab``: a database of its own for the run on the lab's PostgreSQL."""


def lab_sink(root: Path, port: int, run_id: str) -> str:
    """A new database for one run on the lab's server (``root``, ``port``); its URL."""
    server = PostgresServer(root, port)
    if not server.password_file.is_file():
        raise PostgresError(
            f"the lab has no PostgreSQL in {root}; bring the lab up with it "
            "(EOSLAB_WITH_POSTGRES is not 0), or give the sink as a postgresql:// URL"
        )
    return server.create_database("sink_" + re.sub(r"[^a-z0-9]+", "_", run_id.lower())[-50:])


def lab_password(host: str | None, port: int | None, config: LabConfig | None = None) -> str | None:
    """The password of the lab's PostgreSQL when ``host:port`` is that server (a run's sink
    recorded without its password), else None."""
    config = config or LabConfig()
    if (host, port) != (HOST, config.port(BasePort.POSTGRES)):
        return None
    password_file = PostgresServer(
        config.postgres_root, config.port(BasePort.POSTGRES)
    ).password_file
    return password_file.read_text().strip() if password_file.is_file() else None
