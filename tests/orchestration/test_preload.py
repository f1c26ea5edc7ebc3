"""The lab's Airflow scheduler loads its tasks' modules before it forks its workers (the task
processes are forked from them); the other Airflow processes do not load them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from eoslab.orchestration.preload import TASK_MODULES

AIRFLOW_AS = """
import json, sys
import airflow.settings  # imports the home's airflow_local_settings
print(json.dumps([name for name in {modules} if name in sys.modules]))
"""


@pytest.mark.parametrize(("command", "loaded"), [("scheduler", True), ("dag-processor", False)])
def test_only_the_scheduler_loads_the_tasks_modules(
    airflow_env: dict[str, str], command: str, loaded: bool
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", AIRFLOW_AS.format(modules=list(TASK_MODULES)), command],
        env=airflow_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == (list(TASK_MODULES) if loaded else [])
