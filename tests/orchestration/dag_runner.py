"""`airflow dags test` as the tests run it: in a subprocess with the lab's Airflow environment,
its output kept for when a test fails."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from eoslab.runtime.airflow import venv_bin

DAG_RUN_TIMEOUT_S = 540


@dataclass(frozen=True)
class DagRunner:
    env: dict[str, str]
    runs: Path
    reports: Path
    logs: Path

    def test(self, dag_id: str, conf: str, log_name: str) -> subprocess.CompletedProcess[str]:
        """`airflow dags test DAG -c CONF`; the output is kept in logs/<log_name>.log."""
        done = subprocess.run(
            [str(venv_bin() / "airflow"), "dags", "test", dag_id, "-c", conf],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=DAG_RUN_TIMEOUT_S,
            check=False,
        )
        self.logs.mkdir(parents=True, exist_ok=True)
        (self.logs / f"{log_name}.log").write_text(done.stdout + done.stderr)
        return done


def tail(done: subprocess.CompletedProcess[str], lines: int = 60) -> str:
    """The last lines of a finished command's output, for an assertion's message."""
    return "\n".join((done.stdout + done.stderr).splitlines()[-lines:])
