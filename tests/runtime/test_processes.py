"""What a test session's labs leave running when the session dies before their teardown (a
pytest INTERNALERROR skips fixtures' finalizers): found by their marker and killed, and no other
lab's process with them."""

from __future__ import annotations

from pathlib import Path

import psutil

from eoslab.runtime import processes


def test_what_labs_under_a_folder_left_running_is_killed_and_nothing_else(tmp_path: Path) -> None:
    session, elsewhere = tmp_path / "tmp-b", tmp_path / "tmp-a"
    started = {}
    for lab in (session / "lab0", session / "test_x0" / "lab", elsewhere / "lab0"):
        lab.mkdir(parents=True)
        record = processes.spawn("sleeper", ["sleep", "60"], lab / "sleep.log", lab, env={})
        started[lab] = psutil.Process(record.pid)
    try:
        assert processes.kill_left_behind(session) == ["sleep", "sleep"]
        for lab, process in started.items():
            if lab.is_relative_to(session):
                assert process.wait(timeout=10) == -9
        assert started[elsewhere / "lab0"].is_running()
        assert processes.kill_left_behind(session) == []
    finally:
        for process in started.values():
            if process.is_running():
                process.kill()
