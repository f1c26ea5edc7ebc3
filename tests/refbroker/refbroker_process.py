"""The reference broker as a real subprocess on free ports, with a fresh data directory.

Imported by the tests and by conftest.py (whose fixtures hand it out).
"""

from __future__ import annotations

import datetime
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.errors import ErrorCode

from eoslab.probe.client import KafkaProtocolClient
from eoslab.runtime.ports import free_port

HOST = "127.0.0.1"
FAST_JOIN = ("--group-initial-rebalance-delay-ms", "0")
"""Groups form without Kafka's default 3 s initial delay, as in the lab."""
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass
class RunningBroker:
    """One `python -m eoslab.refbroker serve` process; restartable on the same ports and data."""

    data_dir: Path
    extra_args: tuple[str, ...] = ()
    port: int = field(default_factory=free_port)
    control_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.data_dir.parent / f"{self.data_dir.name}.log"

    def start(self) -> None:
        command = [
            sys.executable, "-m", "eoslab.refbroker", "serve",
            "--listen", self.bootstrap,
            "--control", f"{HOST}:{self.control_port}",
            "--data-dir", str(self.data_dir),
            "--log-file", str(self.log_file),
            *self.extra_args,
        ]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (_accepts(self.port) and _accepts(self.control_port)):
            if self.process.poll() is not None:
                stderr = self.process.stderr.read().decode() if self.process.stderr else ""
                pytest.fail(f"refbroker exited with {self.process.returncode}: {stderr}")
            if time.monotonic() > deadline:
                pytest.fail(f"refbroker not listening after {START_TIMEOUT_S}s")
            time.sleep(0.05)

    def stop(self) -> int:
        """SIGTERM and wait: the graceful path (snapshots written). Returns the exit code."""
        return self._end(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL: nothing flushed, nothing closed."""
        self._end(signal.SIGKILL)

    def _end(self, signum: signal.Signals) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signum)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_S)
        if self.process.stderr:
            self.process.stderr.close()
        return self.process.returncode

    def client(self) -> KafkaProtocolClient:
        return KafkaProtocolClient(HOST, self.port)

    def control(self, method: str, path: str, body: object | None = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://{HOST}:{self.control_port}{path}", data=data, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def fault(self, **body: object) -> dict[str, Any]:
        status, answer = self.control("POST", "/faults", body)
        assert status == 200, answer
        return answer

    def counters(self) -> dict[str, Any]:
        status, answer = self.control("GET", "/counters")
        assert status == 200
        return answer

    def create_topic(self, name: str, partitions: int) -> None:
        topic = CreatableTopic(
            name=name,
            num_partitions=partitions,
            replication_factor=1,
            assignments=(),
            configs=(),
        )
        request = CreateTopicsRequest(topics=(topic,), timeout=datetime.timedelta(seconds=10))
        with self.client() as client:
            (result,) = client.request(request).topics
        assert result.error_code is ErrorCode.none, result


StartBroker = Callable[..., RunningBroker]
