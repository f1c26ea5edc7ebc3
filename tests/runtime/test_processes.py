"""What a test session's labs leave running when the session dies before their teardown (a
pytest INTERNALERROR skips fixtures' finalizers): found by their marker and killed, and no other
lab's process with them; and a service's stop, which leaves nothing of its group behind."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import psutil

from eoslab.clock import wait_until
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


def test_a_stop_kills_what_outlives_the_sigterm_of_a_group_whose_leader_ended(
    tmp_path: Path,
) -> None:
    """The leader ends on SIGTERM, a member it started ignores it (as an Airflow scheduler's
    executor worker outlived it): after the grace the member is killed, not left running."""
    script = "(trap '' TERM; exec sleep 300) & exec sleep 300"
    record = processes.spawn("group", ["sh", "-c", script], tmp_path / "g.log", tmp_path, env={})
    assert wait_until(lambda: len(_group(record.pid)) == 2, 10.0)  # its member started
    members = _group(record.pid)
    try:
        processes.stop(record, grace_s=1.0)
        assert not [p for p in members if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    finally:
        for member in members:
            if member.is_running():
                member.kill()


def _group(pgid: int) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(ProcessLookupError, psutil.NoSuchProcess):
            if os.getpgid(process.pid) == pgid:
                found.append(process)
    return found
