"""Lanes (issue 35): the lab's targets' cells side by side through the lab's own Airflow
scheduler, each target's runs one at a time.

The session's lab gets its Airflow (API server, scheduler, DAG processor, triggerer) for this
module only; `eoslab orchestrate matrix`, as `make lab` runs it, triggers eos_nightly there.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from eoslab.orchestration.lanes import lane_held
from eoslab.orchestration.scheduler import Scheduler, call_api
from eoslab.rundir import RunDir
from eoslab.runtime.airflow import ADMIN_USER, lane_pool
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.topology import Kind
from eoslab.settings import LAB_DIR, PORT_OFFSET, REPORTS_DIR, RUNS_DIR

MATRIX_TIMEOUT_S = 900
RECORDS = 1_500  # no-idempotence's fault plays 1.5 s into the run


def _hold(state_dir: Path, events: Any, release: Any) -> None:
    with lane_held(state_dir, ["kafka"], "the first run"):
        events.put("first holds")
        release.wait(60)
        events.put("first releases")


def test_a_run_on_a_busy_target_waits_for_its_lane_and_another_target_does_not(
    tmp_path: Path,
) -> None:
    """Real locks across processes: the second holder of kafka's lane gets it only once the
    first lets go; the reference broker's lane is free meanwhile."""
    context = multiprocessing.get_context("spawn")
    events = context.Queue()
    release = context.Event()
    first = context.Process(target=_hold, args=(tmp_path, events, release))
    first.start()
    try:
        assert events.get(timeout=30) == "first holds"
        with lane_held(tmp_path, ["refbroker"], "a run on the reference broker"):
            pass  # another target's lane: not held back
        started = time.monotonic()
        release_later = context.Process(target=_set_after, args=(release, 1.0))
        release_later.start()
        with lane_held(tmp_path, ["refbroker", "kafka"], "the second run"):
            waited = time.monotonic() - started
            assert events.get(timeout=5) == "first releases"  # it let go before we held it
            assert (tmp_path / "lanes" / "kafka.lock").read_text() == "the second run"
        assert waited >= 1.0
        release_later.join(10)
    finally:
        release.set()
        first.join(30)
    assert first.exitcode == 0


def _set_after(event: Any, delay_s: float) -> None:
    time.sleep(delay_s)
    event.set()


@pytest.fixture(scope="module")
def scheduled_lab(
    lab: LocalRuntime, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LocalRuntime, dict[str, str]]]:
    """The session's lab with its Airflow added (removed again after the module), and the
    environment both it and the matrix command see: runs and reports in a folder of the
    module's."""
    out = tmp_path_factory.mktemp("lanes")
    folders = {RUNS_DIR: str(out / "runs"), REPORTS_DIR: str(out / "reports")}
    runtime = LocalRuntime(dataclasses.replace(lab.config, with_airflow=True))
    parts = [s.name for s in runtime.config.services() if s.kind is Kind.AIRFLOW]
    with pytest.MonkeyPatch.context() as patch:  # what the Airflow processes inherit
        for name, value in folders.items():
            patch.setenv(name, value)
        runtime.add(parts)
    env = {
        **os.environ,
        **folders,
        LAB_DIR: str(lab.config.state_dir),
        PORT_OFFSET: str(lab.config.port_offset),
    }
    try:
        yield runtime, env
    finally:
        runtime.remove(parts)


def test_the_matrix_runs_a_lane_per_target_through_the_labs_scheduler(
    scheduled_lab: tuple[LocalRuntime, dict[str, str]],
) -> None:
    """Two cells on Kafka 3.9 and two on the reference broker: the two targets' runs overlap,
    each target's runs never do, every run took its lane's pool, and every cell conforms."""
    runtime, env = scheduled_lab
    runs, reports = Path(env[RUNS_DIR]), Path(env[REPORTS_DIR])
    matrix = [sys.executable, "-m", "eoslab.orchestration.command", "matrix"]
    cells = [
        *("--scenario", "baseline", "--scenario", "no-idempotence"),
        *("--target", "kafka", "--target", "refbroker", "--records", str(RECORDS)),
    ]
    refused = subprocess.run(
        [*matrix, *cells, "--no-lanes"], env=env, capture_output=True, text=True, check=False
    )
    assert refused.returncode == 1
    assert refused.stderr.strip().count("\n") == 0, refused.stderr  # one line
    assert "scheduler" in refused.stderr
    assert "LANES=0" in refused.stderr

    done = subprocess.run(
        [*matrix, *cells],
        env=env,
        capture_output=True,
        text=True,
        timeout=MATRIX_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + _failed_logs(runtime)
    assert "a lane per target" in done.stdout
    assert "4 of 4 cells conform" in done.stdout

    spans: dict[str, list[tuple[int, int]]] = {"kafka": [], "refbroker": []}
    for run_json in runs.glob("nightly-*/*/run.json"):
        info = RunDir(run_json.parent).read_info()
        assert info.ended_ms is not None
        spans[info.target].append((info.started_ms, info.ended_ms))
    assert [len(s) for s in spans.values()] == [2, 2], spans
    for target, (one, other) in ((t, sorted(s)) for t, s in spans.items()):
        assert one[1] <= other[0], f"two runs on {target} overlapped: {spans[target]}"
    assert any(k[0] < r[1] and r[0] < k[1] for k in spans["kafka"] for r in spans["refbroker"]), (
        f"the lanes never ran side by side: {spans}"
    )

    scheduler = Scheduler.of_lab(runtime.airflow())
    assert scheduler is not None
    [run_id] = [
        line.split()[1]
        for line in Path(_airflow_log(done.stdout)).read_text().splitlines()
        if "triggered" in line
    ]
    instances = scheduler.task_instances("eos_nightly", run_id)
    # each run kept its topic for its check before its lane went on (on the warm Spark)
    tasks_log = runtime.airflow().home / "logs" / "dag_id=eos_nightly" / f"run_id={run_id}"
    run_logs = sorted(tasks_log.glob("task_id=*.run_scenario/map_index=*/attempt=*.log"))
    assert len(run_logs) == 4, run_logs
    for run_log in run_logs:
        assert "kept for its check: eos-" in run_log.read_text(), run_log
    scheduled_runs = [
        ti for ti in instances if ti["task_id"].endswith(".run_scenario") and ti["map_index"] >= 0
    ]
    assert sorted((ti["task_id"].split(".")[0], ti["pool"]) for ti in scheduled_runs) == [
        ("lane_kafka", lane_pool("kafka")),
        ("lane_kafka", lane_pool("kafka")),
        ("lane_refbroker", lane_pool("refbroker")),
        ("lane_refbroker", lane_pool("refbroker")),
    ]
    # each cell's check outranks every run: queued as its run ends, not after the lanes' runs
    weights = {
        task: {ti["priority_weight"] for ti in instances if ti["task_id"].endswith(task)}
        for task in (".run_scenario", ".spark_checker", ".publish")
    }
    assert min(weights[".spark_checker"] | weights[".publish"]) > max(weights[".run_scenario"])
    # the lab's Kafka 4 lane had no cells: its cell group skipped, never expanded
    kafka4 = [ti for ti in instances if ti["task_id"].startswith("lane_kafka4.cell.")]
    assert {(ti["map_index"], ti["state"]) for ti in kafka4} == {(-1, "skipped")}, kafka4
    summary = json.loads(next((reports / "nightly").glob("*/summary.json")).read_text())
    assert (summary["cells"], summary["conforming"]) == (4, 4)


def test_what_the_labs_last_life_left_its_scheduler_is_settled_before_it_starts(
    scheduled_lab: tuple[LocalRuntime, dict[str, str]],
) -> None:
    """Planted while no scheduler runs, as a lab brought down leaves them: a DAG run queued (a
    run the lab went down in), and the nightly's next run due an hour ago (its midnight passed
    while the lab was down). When the scheduler comes up, the run is failed with its tasks
    skipped, the nightly's next run is a future midnight, no scheduled run is made, and the
    scheduler's log names both — neither taken up ahead of what is asked next (a resumed
    nightly held every lane of `make conformance`; the missed one would run the full matrix
    beside the next day's `make lab`)."""
    runtime, _ = scheduled_lab
    home = runtime.airflow()
    [scheduler] = [s.name for s in runtime.config.services() if s.component == "scheduler"]
    runtime.remove([scheduler])
    body = {"username": ADMIN_USER, "password": home.password()}
    api = Scheduler(home, str(call_api(f"{home.url}/auth/token", body=body)["access_token"]))
    run_id = f"left__{time.strftime('%Y%m%dT%H%M%S')}"
    request = {"matrix": "default", "scenarios": ["baseline"], "targets": ["refbroker"]}
    api.trigger("eos_nightly", run_id, datetime.now(UTC).isoformat(), request)
    assert api.state("eos_nightly", run_id) == "queued"
    due = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%d %H:%M:%S.000000")
    assert home.left_unsettled()  # the queued run alone
    with sqlite3.connect(home.database) as db:  # as Airflow stores it
        db.execute(
            "UPDATE dag SET next_dagrun = ?, next_dagrun_create_after = ?, "
            "next_dagrun_data_interval_start = ?, next_dagrun_data_interval_end = ? "
            "WHERE dag_id = 'eos_nightly'",
            (due, due, due, due),
        )
    runtime.add([scheduler])
    try:
        assert api.state("eos_nightly", run_id) == "failed"
        assert not home.left_unsettled()  # nothing left: the next start spares Airflow's imports
        time.sleep(10)  # the scheduler's loops, several times over
        assert api.state("eos_nightly", run_id) == "failed"
        states = {ti["task_id"]: ti["state"] for ti in api.task_instances("eos_nightly", run_id)}
        assert set(states.values()) == {"skipped"}, states  # as the API marks pending tasks
        nightly = call_api(f"{home.url}/api/v2/dags/eos_nightly", token=api.token)
        next_run = datetime.fromisoformat(nightly["next_dagrun_run_after"])
        assert next_run > datetime.now(UTC)
        assert (next_run.hour, next_run.minute) == (0, 0)
        assert _scheduled_runs(api) == []
        said = [
            line.removeprefix("=== eoslab, before the scheduler: ")
            for line in runtime.log_path(scheduler).read_text().splitlines()
            if line.startswith("=== eoslab, before the scheduler: ")
        ]
        assert said[0] == f"eos_nightly {run_id}: left unfinished, marked failed"
        assert said[1].startswith("eos_nightly: its run due ")
        assert len(said) == 2, said  # the changes alone, not Airflow's warnings beside them
    finally:
        for scheduled in _scheduled_runs(api):  # the fix failing: not the full matrix here
            api.fail("eos_nightly", scheduled)


def _scheduled_runs(api: Scheduler) -> list[str]:
    runs = call_api(f"{api.home.url}/api/v2/dags/eos_nightly/dagRuns", token=api.token)
    return [run["dag_run_id"] for run in runs["dag_runs"] if run["run_type"] == "scheduled"]


def _airflow_log(stdout: str) -> str:
    [line] = [line for line in stdout.splitlines() if line.startswith("Airflow's log: ")]
    return line.removeprefix("Airflow's log: ").split(";")[0]


def _failed_logs(runtime: LocalRuntime) -> str:
    """The last lines of every task log that tells of an error (the lab's folder goes with the
    session)."""
    tails = []
    for log in sorted((runtime.airflow().home / "logs").rglob("*.log")):
        text = log.read_text(errors="replace")
        if '"level": "error"' in text or "[error" in text:
            tails.append(f"--- {log}\n" + "\n".join(text.splitlines()[-15:]))
    return "\n".join(tails)
