"""The nemesis plays every step kind on a fake lab, ends what has an end, and heals the rest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeConsumers, FakeProxy, FakeRefbroker, FakeRuntime, FakeWorkload

from eoslab.nemesis.nemesis import Nemesis
from eoslab.nemesis.steps import STEP_KINDS, probe
from eoslab.nemesis.timeline import ResolvedStep, resolve
from eoslab.rundir import LabTarget, RunDir
from eoslab.scenarios.catalogue import ScenarioError, parse_scenario


class Lab:
    def __init__(self, tmp_path: Path, target: LabTarget) -> None:
        self.runtime = FakeRuntime()
        self.proxy = FakeProxy()
        self.refbroker = FakeRefbroker()
        self.workload = FakeWorkload()
        self.consumers = FakeConsumers()
        self.run_dir = RunDir(tmp_path / "run").create()
        self.nemesis = Nemesis(
            run_dir=self.run_dir,
            target=target,
            runtime=self.runtime,
            bootstrap="127.0.0.1:1",
            topic="t",
            proxy=self.proxy,  # type: ignore[arg-type]
            refbroker=self.refbroker,  # type: ignore[arg-type]
            workload=self.workload,  # type: ignore[arg-type]
            consumers=self.consumers,  # type: ignore[arg-type]
        )

    def steps(self, target: LabTarget, *nemesis: dict[str, Any]) -> list[ResolvedStep]:
        scenario = parse_scenario(
            {
                "name": "fake",
                "description": "d",
                "targets": [target],
                "workload": {"producers": 2},
                "consumers": {"consumers": 2, "mode": "dedup-table"},
                "nemesis": list(nemesis),
            },
            "fake",
        )
        return resolve(scenario.nemesis, target, seed=0)

    def logged(self) -> list[tuple[str, str | None, str]]:
        lines = self.run_dir.faults_jsonl.read_text().splitlines()
        return [(e["kind"], e["target"], e["phase"]) for e in map(json.loads, lines)]


def test_process_steps_break_and_their_ends_repair(tmp_path: Path) -> None:
    lab = Lab(tmp_path, "kafka")
    kill, pause, restart = lab.steps(
        "kafka",
        {"kind": "kill", "at": 0, "target": "kafka-2", "duration": 1},
        {"kind": "pause", "at": 0, "target": "kafka-3", "duration": 1},
        {"kind": "restart", "at": 0, "target": "kafka-1"},
    )
    for step in (kill, pause, restart):
        lab.nemesis.start(step)
    lab.nemesis.end(kill)
    lab.nemesis.end(pause)
    assert lab.runtime.calls == [
        ("kill", "kafka-2"),
        ("pause", "kafka-3"),
        ("restart", "kafka-1"),
        ("restart", "kafka-2"),
        ("resume", "kafka-3"),
    ]
    assert lab.nemesis.heal() == []
    assert len(lab.runtime.calls) == 5  # nothing left to heal
    assert lab.nemesis.errors == []
    assert lab.logged() == [
        ("kill", "kafka-2", "start"),
        ("pause", "kafka-3", "start"),
        ("restart", "kafka-1", "start"),
        ("restart", "kafka-1", "end"),
        ("kill", "kafka-2", "end"),
        ("pause", "kafka-3", "end"),
    ]


def test_a_rolling_restart_goes_through_every_broker_of_the_target(tmp_path: Path) -> None:
    lab = Lab(tmp_path, "kafka")
    (step,) = lab.steps("kafka", {"kind": "rolling-restart", "at": 0, "interval": 0})
    lab.nemesis.start(step)
    assert lab.runtime.calls == [("restart", f"kafka-{i}") for i in (1, 2, 3)]
    assert [e[2] for e in lab.logged()] == ["start", "end"] * 3


def test_heal_undoes_what_is_still_broken_last_broken_first(tmp_path: Path) -> None:
    lab = Lab(tmp_path, "refbroker")
    steps = lab.steps(
        "refbroker",
        {"kind": "kill", "at": 0, "target": "leader"},
        {"kind": "proxy", "at": 0, "target": "*", "fault": {"kind": "blackhole"}},
        {"kind": "refbroker", "at": 0, "fault": {"kind": "retained-batches", "count": 1}},
        {"kind": "pause", "at": 0, "target": "refbroker", "duration": 5},
    )
    for step in steps:
        lab.nemesis.start(step)
    assert lab.proxy.active == {"f1": {"kind": "blackhole", "route": "*"}}
    assert lab.refbroker.applied == [{"kind": "retained-batches", "count": 1}]
    assert lab.nemesis.heal() == []
    assert lab.runtime.calls == [
        ("kill", "refbroker"),
        ("pause", "refbroker"),
        ("resume", "refbroker"),
        ("restart", "refbroker"),
    ]
    assert lab.proxy.active == {}
    assert lab.refbroker.cleared == 1  # back to the broker's configured duplicate window
    heals = [e for e in lab.logged() if e[0] == "heal"]
    assert len(heals) == 4
    assert lab.nemesis.heal() == []  # a second heal has nothing left to do


def test_a_step_that_fails_is_logged_and_the_run_goes_on(tmp_path: Path) -> None:
    lab = Lab(tmp_path, "kafka")

    def broken(name: str) -> None:
        raise RuntimeError(f"{name} refuses")

    lab.runtime.kill = broken  # type: ignore[method-assign]
    kill, restart = lab.steps(
        "kafka",
        {"kind": "kill", "at": 0, "target": "kafka-1"},
        {"kind": "restart", "at": 0, "target": "kafka-2"},
    )
    lab.nemesis.start(kill)
    lab.nemesis.start(restart)
    assert lab.nemesis.errors == ["step 0 (kill) start: kafka-1 refuses"]
    assert lab.runtime.calls == [("restart", "kafka-2")]
    assert lab.nemesis.heal() == []  # the failed kill broke nothing


def test_proxy_and_refbroker_steps_end_by_removing_their_own_fault(tmp_path: Path) -> None:
    lab = Lab(tmp_path, "refbroker")
    first, second, state = lab.steps(
        "refbroker",
        {
            "kind": "proxy",
            "at": 0,
            "target": "refbroker",
            "duration": 1,
            "fault": {"kind": "reset"},
        },
        {
            "kind": "proxy",
            "at": 0,
            "target": "leader",
            "duration": 2,
            "fault": {"kind": "delay", "ms": 5},
        },
        {
            "kind": "refbroker",
            "at": 0,
            "duration": 1,
            "fault": {"kind": "legacy-mode", "enabled": True},
        },
    )
    for step in (first, second, state):
        lab.nemesis.start(step)
    lab.nemesis.end(first)
    assert list(lab.proxy.active) == ["f2"]  # the overlapping step's fault stays
    lab.nemesis.end(state)
    assert lab.refbroker.cleared == 1
    ends = [
        json.loads(line)
        for line in lab.run_dir.faults_jsonl.read_text().splitlines()
        if json.loads(line)["phase"] == "end"
    ]
    assert ends[0]["detail"] == {"step": 0, "id": "f1", "matched": 7, "injected": 3}
    assert lab.nemesis.heal() == []
    assert lab.proxy.active == {}


def test_producer_crashes_restart_at_once_or_after_their_duration(tmp_path: Path) -> None:
    lab = Lab(tmp_path, "kafka")
    at_once, later = lab.steps(
        "kafka",
        {"kind": "producer-crash", "at": 0, "producer": 0},
        {"kind": "producer-crash", "at": 0, "producer": 1, "duration": 2},
    )
    lab.nemesis.start(at_once)
    lab.nemesis.start(later)
    assert lab.workload.calls == [("crash", 0), ("restart", 0), ("crash", 1)]
    lab.nemesis.end(later)
    assert lab.workload.calls[-1] == ("restart", 1)
    assert [e[2] for e in lab.logged()] == ["instant", "instant", "start", "end"]


def test_consumer_steps_crash_freeze_and_churn_the_group(tmp_path: Path) -> None:
    lab = Lab(tmp_path, "kafka")
    crash, crash_later, pause, join = lab.steps(
        "kafka",
        {"kind": "consumer-crash", "at": 0, "consumer": 0},
        {"kind": "consumer-crash", "at": 0, "consumer": 1, "duration": 2},
        {"kind": "consumer-pause", "at": 0, "consumer": 0, "duration": 10},
        {"kind": "consumer-join", "at": 0, "duration": 3},
    )
    for step in (crash, crash_later, pause, join):
        lab.nemesis.start(step)
    assert lab.consumers.calls == [
        ("crash", 0),
        ("restart", 0),
        ("crash", 1),
        ("freeze", 0),
        ("join", 2),
    ]
    lab.nemesis.end(crash_later)
    lab.nemesis.end(join)
    assert lab.consumers.calls[-2:] == [("restart", 1), ("leave", 2)]
    assert lab.nemesis.heal() == []  # the frozen consumer is resumed
    assert lab.consumers.calls[-1] == ("resume", 0)
    assert ("consumer-join", "consumer-2", "end") in lab.logged()


def test_a_consumer_crash_that_misses_its_point_is_a_failed_step(tmp_path: Path) -> None:
    """A consumer with nothing left to process cannot die between an effect and its commit:
    the step fails (the run reports it) instead of passing for the fault it did not inject."""
    lab = Lab(tmp_path, "kafka")
    lab.consumers.effects_after_arming = False
    (crash,) = lab.steps("kafka", {"kind": "consumer-crash", "at": 0, "consumer": 0})
    lab.nemesis.start(crash)
    assert lab.consumers.calls == [("crash", 0), ("restart", 0)]
    (error,) = lab.nemesis.errors
    assert "consumer-0 was not killed between an effect and its commit" in error


def test_consumer_steps_need_a_consumer_workload() -> None:
    with pytest.raises(ScenarioError, match="consumer workload"):
        parse_scenario(
            {
                "name": "no-consumers",
                "description": "d",
                "targets": ["kafka"],
                "nemesis": [{"kind": "consumer-join", "at": 0}],
            },
            "no-consumers",
        )


def test_probe_steps_play_their_probe_on_the_runs_topic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = Lab(tmp_path, "kafka")
    played: list[dict[str, Any]] = []
    monkeypatch.setitem(
        probe.SCENARIO_PROBES, "seq-jump", lambda **where: played.append(where) or {"ok": True}
    )
    (step,) = lab.steps("kafka", {"kind": "probe", "at": 0, "probe": "seq-jump", "partition": 2})
    lab.nemesis.start(step)
    assert played == [
        {
            "bootstrap": "127.0.0.1:1",
            "topic": "t",
            "partition": 2,
            "run_dir": lab.run_dir,
            "run_id": lab.run_dir.run_id,
        }
    ]
    assert lab.logged() == [("probe", "partition-2", "start"), ("probe", "partition-2", "end")]


def test_every_step_kind_is_covered_here() -> None:
    source = Path(__file__).read_text()
    assert all(f'"kind": "{kind}"' in source for kind in STEP_KINDS)
