"""A standalone Spark cluster on loopback: one master and N workers, started from this
virtualenv's pyspark (its own ``bin/spark-class``, the pinned Spark), for checks on a real
multi-process cluster — executors in JVMs of their own, the shuffle between processes, the
connectors shipped to the executors by ``spark.jars`` as to any cluster.

``eoslab lab spark-cluster`` keeps one up until interrupted; ``eoslab verify RUN_DIR --master
spark://127.0.0.1:7077`` checks a run on it (the DAGs' checks go to a Spark Connect server:
start one on the cluster with ``spark.master`` set to its URL). The same check on the cluster
and on ``local[2]`` gives the same tables (tests/verify).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from eoslab.clock import wait_until
from eoslab.runtime.health import port_open
from eoslab.runtime.spark import spark_environment, spark_home
from eoslab.settings import HOST

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
START_TIMEOUT_S = 120.0


class SparkClusterError(RuntimeError):
    """The cluster did not come up (the message names the log)."""


@dataclass
class StandaloneCluster:
    """One master (``master_port``, its UI and JSON status on ``ui_port``) and ``workers``
    workers of ``worker_cores`` cores and ``worker_memory`` each; logs and work folders in
    ``folder``."""

    folder: Path
    master_port: int = 7077
    ui_port: int = 8090
    workers: int = 2
    worker_cores: int = 1
    worker_memory: str = "1g"
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    def log(self, name: str) -> Path:
        return self.folder / f"{name}.log"

    def alive_workers(self) -> int:
        """How many workers the master counts alive (0 when it does not answer)."""
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.ui_port}/json/", timeout=2) as reply:
                return int(json.load(reply).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def start(self) -> Self:
        """Start the master, then the workers; return once every worker has registered."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self._spawn(
            "spark-master",
            MASTER_CLASS,
            *("--host", HOST, "--port", str(self.master_port), "--webui-port", str(self.ui_port)),
        )
        if not wait_until(lambda: port_open(self.master_port), START_TIMEOUT_S, interval_s=0.5):
            self.stop()
            raise SparkClusterError(
                f"the Spark master did not listen; see {self.log('spark-master')}"
            )
        for index in range(1, self.workers + 1):
            work = self.folder / f"worker-{index}"
            self._spawn(
                f"spark-worker-{index}",
                WORKER_CLASS,
                *("--host", HOST, "--cores", str(self.worker_cores)),
                *("--memory", self.worker_memory, "--work-dir", str(work)),
                *("--webui-port", "0", self.url),
            )
        if not wait_until(
            lambda: self.alive_workers() >= self.workers, START_TIMEOUT_S, interval_s=0.5
        ):
            self.stop()
            raise SparkClusterError(
                f"{self.workers} worker(s) did not register with the master; see the logs in "
                f"{self.folder}"
            )
        return self

    def _spawn(self, name: str, main_class: str, *arguments: str) -> None:
        argv = [str(spark_home() / "bin" / "spark-class"), main_class, *arguments]
        with self.log(name).open("ab") as out:
            self._processes.append(
                subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env={**os.environ, **spark_environment()},
                    cwd=self.folder,
                )
            )

    def stop(self) -> None:
        """Every process of the cluster and its children (the executors), workers first."""
        for process in reversed(self._processes):
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in reversed(self._processes):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        self._processes.clear()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
