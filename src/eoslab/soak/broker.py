"""The reference broker under soak: a real `python -m eoslab.refbroker serve` process on free
loopback ports, killed with SIGKILL and restarted on the same ports and data directory."""

from __future__ import annotations

import abc
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from kio.schema.api_versions.v3 import ApiVersionsRequest
from kio.schema.errors import ErrorCode

from eoslab.admin import create_topic
from eoslab.probe.client import KafkaProtocolClient
from eoslab.runtime.health import port_open
from eoslab.runtime.ports import free_port

HOST = "127.0.0.1"
START_TIMEOUT_S = 60.0


class BrokerFailedError(RuntimeError):
    """The reference broker did not start, or died."""


@dataclass
class ServerProcess(abc.ABC):
    """One of the lab's own servers as a process of the soak, on loopback ports picked free."""

    workdir: Path
    port: int = field(default_factory=free_port)
    control_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    name: ClassVar[str] = "server"

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    @abc.abstractmethod
    def argv(self) -> list[str]:
        """The server's command line."""

    def start(self) -> float:
        """Start (or restart) and wait until it listens; the seconds that took."""
        begin = time.monotonic()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT)
        self.starts += 1
        while not port_open(self.port, HOST):
            if self.process.poll() is not None:
                raise BrokerFailedError(
                    f"the {self.name} exited with {self.process.returncode} on start "
                    f"{self.starts}; see {self.log_path}"
                )
            if time.monotonic() - begin > START_TIMEOUT_S:
                raise BrokerFailedError(f"the {self.name} not listening after {START_TIMEOUT_S}s")
            time.sleep(0.02)
        return time.monotonic() - begin

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """kill -9: nothing flushed, nothing closed."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> int | None:
        """SIGTERM and wait (the graceful path); the exit code, None if it had to be killed."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def _proc(self, name: str) -> str | None:
        """/proc/<pid>/<name> of the live process (None once it is gone)."""
        if self.process is None or not self.alive():
            return None
        try:
            return Path(f"/proc/{self.process.pid}/{name}").read_text()
        except OSError:
            return None

    def rss_bytes(self) -> int | None:
        """Resident set size (VmRSS)."""
        status = self._proc("status") or ""
        rss = next(
            (line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")), None
        )
        return None if rss is None else int(rss) * 1024

    def cpu_seconds(self) -> float | None:
        """User + system CPU time of the process so far."""
        stat = self._proc("stat")
        if stat is None:
            return None
        fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def client(self, timeout_s: float = 10.0) -> KafkaProtocolClient:
        return KafkaProtocolClient(HOST, self.port, client_id="eoslab-soak", timeout_s=timeout_s)

    def answers(self, timeout_s: float) -> bool:
        """Whether a fresh connection gets an ApiVersions answer within ``timeout_s``."""
        try:
            with self.client(timeout_s) as client:
                response = client.request(
                    ApiVersionsRequest(client_software_name="soak", client_software_version="1")
                )
        except OSError:
            return False
        return bool(response.error_code is ErrorCode.none)

    def served_versions(self) -> dict[int, tuple[int, int]]:
        """ApiVersions: every API key the broker advertises and its version range."""
        with self.client() as client:
            response = client.request(
                ApiVersionsRequest(client_software_name="soak", client_software_version="1")
            )
        return {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in response.api_keys}

    def create_topics(self, names: tuple[str, ...], partitions: int = 1) -> None:
        for name in names:
            create_topic(self.bootstrap, name, partitions=partitions, replication=1)


@dataclass
class BrokerProcess(ServerProcess):
    """`python -m eoslab.refbroker serve` on ``workdir/data``, restartable on the same ports."""

    fsync: str = "every-batch"
    options: tuple[str, ...] = ()
    """Further `serve` options (the producer-id soak's expiry settings)."""
    name: ClassVar[str] = "refbroker"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    def argv(self) -> list[str]:
        return [
            sys.executable, "-m", "eoslab.refbroker", "serve",
            f"--listen={self.bootstrap}",
            f"--control={HOST}:{self.control_port}",
            f"--data-dir={self.data_dir}",
            f"--fsync={self.fsync}",
            f"--log-file={self.log_path}",
            "--log-level=ERROR",  # internal errors only: bad input is routine here
            "--group-initial-rebalance-delay-ms=0",
            *self.options,
        ]  # fmt: skip


@dataclass
class ProxyProcess(ServerProcess):
    """`python -m eoslab.proxy` with one route to ``upstream`` (no fault armed)."""

    upstream: int = 0
    name: ClassVar[str] = "proxy"

    def argv(self) -> list[str]:
        return [
            sys.executable, "-m", "eoslab.proxy",
            f"--route=soak={self.bootstrap}={HOST}:{self.upstream}",
            f"--control={HOST}:{self.control_port}",
        ]  # fmt: skip
