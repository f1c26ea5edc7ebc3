"""A catalogue scenario run on the session's lab as the tests run one: into the test's own
folder, without the progress display."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.dataset as ds

from eoslab.rundir import RunDir
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


def blind_processings(run: RunDir) -> list[dict[str, Any]]:
    """The run's processings the poll checks would pass blind: whose client did not tell their
    partition's high watermark, or told one not past the record (``watermark_regression``), or
    whose partition no rebalance callback had assigned (``nonmonotonic_poll``'s epochs)."""
    columns = ["partition", "offset", "watermark", "assignment"]
    listed = ds.dataset(run.processed_dir).to_table(columns=columns).to_pylist()
    assert listed, "no processing journaled"
    return [
        r
        for r in listed
        if r["watermark"] is None or r["watermark"] <= r["offset"] or r["assignment"] < 1
    ]
