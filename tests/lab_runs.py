"""A catalogue scenario run on the session's lab as the tests run one: into the test's own
folder, without the progress display."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eoslab.runtime.local import LocalRuntime
from eoslab.scenarios.catalogue import find_scenario
from eoslab.scenarios.executor import RunResult, execute
from eoslab.scenarios.schema import Scenario


def execute_on(
    lab: LocalRuntime, tmp_path: Path, scenario: Scenario | str, target: str, **options: Any
) -> RunResult:
    """``scenario`` (or the catalogue's of that name) run on ``target`` of ``lab``, its run
    directory under ``tmp_path``; ``options`` as :func:`eoslab.scenarios.executor.execute`'s."""
    return execute(
        find_scenario(scenario) if isinstance(scenario, str) else scenario,
        target,
        runtime=lab,
        config=lab.config,
        runs_root=tmp_path,
        show_progress=False,
        **options,
    )
