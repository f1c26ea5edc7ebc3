"""The lab's state file under processes that change it side by side (the lanes' nemeses
restart services of different targets at once)."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.processes import ProcessRecord
from eoslab.runtime.topology import LabConfig

CHANGERS = 4


def _change(state_dir: Path, name: str, start: float) -> None:
    runtime = LocalRuntime(LabConfig(state_dir=state_dir))
    time.sleep(max(0.0, start - time.time()))
    with runtime._changing() as records:
        time.sleep(0.2)  # a restart's start between reading and saving, widened
        records[name] = ProcessRecord(name, 1, 0.0, ["true"], "log")


def test_changes_made_at_once_by_several_processes_are_all_kept(tmp_path: Path) -> None:
    """Four processes, each adding its own record at the same moment: all four are there
    (read-change-save without the lock keeps one: each saves what it read, plus its own)."""
    context = multiprocessing.get_context("spawn")
    start = time.time() + 2.0  # after every process has started
    changers = [
        context.Process(target=_change, args=(tmp_path, f"service-{i}", start))
        for i in range(CHANGERS)
    ]
    for changer in changers:
        changer.start()
    for changer in changers:
        changer.join(30)
    assert [changer.exitcode for changer in changers] == [0] * CHANGERS
    kept = LocalRuntime(LabConfig(state_dir=tmp_path))._records()
    assert sorted(kept) == [f"service-{i}" for i in range(CHANGERS)]
