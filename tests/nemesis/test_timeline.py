"""Timelines: resolution is a pure function of scenario and seed; the runner plays steps in order."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from eoslab.clock import wait_until
from eoslab.nemesis.timeline import ResolvedStep, TimelineRunner, resolve
from eoslab.scenarios.catalogue import parse_scenario

JITTERY = {
    "name": "jittery",
    "description": "random targets and jitter",
    "targets": ["kafka", "refbroker"],
    "nemesis": [
        {"kind": "kill", "at": 1, "jitter": 5, "target": "random-broker", "duration": 1},
        {"kind": "pause", "at": 2, "jitter": 5, "target": "random-broker", "duration": 1},
        {"kind": "proxy", "after_acked": 10, "target": "leader", "fault": {"kind": "blackhole"}},
        {"kind": "restart", "at": 3, "target": "kafka-2", "on": ["kafka"]},
    ],
}


def test_the_same_scenario_and_seed_resolve_to_the_same_timeline() -> None:
    first = resolve(parse_scenario(JITTERY, "a").nemesis, "kafka", seed=42)
    second = resolve(parse_scenario(JITTERY, "b").nemesis, "kafka", seed=42)
    assert first == second
    assert len(first) == 4
    assert first[0].at_s is not None
    assert 1 <= first[0].at_s < 6
    assert first[0].target in {"kafka-1", "kafka-2", "kafka-3"}


def test_another_seed_draws_other_times() -> None:
    steps = parse_scenario(JITTERY, "a").nemesis
    draws = {tuple(s.at_s for s in resolve(steps, "kafka", seed)) for seed in range(5)}
    assert len(draws) == 5


def test_steps_for_another_target_are_left_out_and_the_leader_is_the_refbroker() -> None:
    resolved = resolve(parse_scenario(JITTERY, "a").nemesis, "refbroker", seed=1)
    assert [s.kind for s in resolved] == ["kill", "pause", "proxy"]
    assert {s.target for s in resolved} == {"refbroker"}


def test_random_brokers_and_the_controller_on_kafka4() -> None:
    """A seeded pick among the KRaft nodes; the controller is looked up when the step starts
    (on the reference broker it is the broker)."""
    scenario = parse_scenario(
        {
            "name": "kraft",
            "description": "kafka4 targets",
            "targets": ["kafka4", "refbroker"],
            "nemesis": [
                {"kind": "kill", "at": 1, "target": "random-broker", "duration": 1},
                {"kind": "pause", "at": 2, "target": "controller", "duration": 1},
            ],
        },
        "kraft",
    )
    picks = {resolve(scenario.nemesis, "kafka4", seed)[0].target for seed in range(20)}
    assert picks == {"kafka4-1", "kafka4-2", "kafka4-3"}
    assert resolve(scenario.nemesis, "kafka4", 0)[1].target == "controller"
    assert resolve(scenario.nemesis, "refbroker", 0)[1].target == "refbroker"


def kafka_steps(*nemesis: dict[str, Any]) -> list[ResolvedStep]:
    """A scenario's nemesis steps on Kafka 3.9, resolved (seed 0)."""
    scenario = parse_scenario(
        {"name": "steps", "description": "d", "targets": ["kafka"], "nemesis": list(nemesis)},
        "steps",
    )
    return resolve(scenario.nemesis, "kafka", 0)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    def start(self, step: ResolvedStep) -> None:
        self.events.append(("start", step.index))

    def end(self, step: ResolvedStep) -> None:
        self.events.append(("end", step.index))

    def skip(self, step: ResolvedStep, reason: str) -> None:
        self.events.append(("skip", step.index))


def on_fake_clock(
    steps: list[ResolvedStep],
    recorder: Recorder,
    now: list[float],
    acked: list[int],
    workload_done: Callable[[], bool] = lambda: False,
) -> TimelineRunner:
    """A runner on the clock ``now[0]``, each action played before its tick returns."""
    return TimelineRunner(
        steps,
        recorder,
        acked=lambda: acked[0],
        workload_done=workload_done,
        clock=lambda: now[0],
        concurrent=False,
    )


def test_the_runner_starts_ends_and_skips_on_its_clock() -> None:
    steps = kafka_steps(
        {"kind": "pause", "at": 1.0, "target": "kafka-1", "duration": 2.0},
        {"kind": "restart", "after_acked": 5, "target": "kafka-2"},
        {"kind": "restart", "after_acked": 2_000, "target": "kafka-3"},
    )
    now = [100.0]
    acked = [0]
    recorder = Recorder()
    runner = on_fake_clock(steps, recorder, now, acked, workload_done=lambda: acked[0] >= 6)
    assert not runner.prime()  # no step at 0: nothing in place before the workload
    runner.tick(now[0])
    assert recorder.events == []
    now[0] = 100.99
    runner.tick(now[0])
    assert recorder.events == []
    now[0] = 101.0
    runner.tick(now[0])
    assert recorder.events == [("start", 0)]
    acked[0] = 5
    runner.tick(now[0])
    assert recorder.events[-1] == ("start", 1)
    acked[0] = 6  # the workload is done: the last trigger will never come
    runner.tick(now[0])
    assert recorder.events[-1] == ("skip", 2)
    now[0] = 102.99
    runner.tick(now[0])
    assert ("end", 0) not in recorder.events
    assert not runner.done
    now[0] = 103.0
    runner.tick(now[0])
    assert recorder.events[-1] == ("end", 0)
    assert runner.done


def test_a_step_at_zero_is_in_place_before_the_workload_starts() -> None:
    steps = kafka_steps(
        {"kind": "pause", "at": 0, "target": "kafka-1", "duration": 2.0},
        {"kind": "restart", "at": 0.5, "target": "kafka-2"},
    )
    now = [50.0]
    recorder = Recorder()
    runner = on_fake_clock(steps, recorder, now, [0])
    assert runner.prime()  # before the workload: only the step at 0 (and there was one)
    assert recorder.events == [("start", 0)]
    assert not runner.prime()  # nothing is due at 0 any more
    now[0] = 51.5  # the clients took 1.5 s to start; the timeline's clock starts now
    runner.tick(now[0])
    assert recorder.events == [("start", 0)]
    now[0] = 52.0  # the at-0 step's duration runs from when it was in place
    runner.tick(now[0])
    assert recorder.events == [("start", 0), ("start", 1), ("end", 0)]


class BlockingEnd(Recorder):
    """A step whose end blocks until released (a broker's restart waiting for it)."""

    def __init__(self) -> None:
        super().__init__()
        self.ending = threading.Event()
        self.release = threading.Event()

    def end(self, step: ResolvedStep) -> None:
        self.ending.set()
        assert self.release.wait(30)
        super().end(step)


def test_a_step_whose_end_blocks_holds_up_no_other_trigger() -> None:
    """The runner's thread plays each action in a thread of its own, and stops by itself once
    every step has ended."""
    steps = kafka_steps(
        {"kind": "kill", "at": 0.01, "target": "kafka-1", "duration": 0.01},
        {"kind": "restart", "after_acked": 5, "target": "kafka-2"},
    )
    acked = [0]
    recorder = BlockingEnd()
    runner = TimelineRunner(
        steps,
        recorder,
        acked=lambda: acked[0],
        workload_done=lambda: False,
        tick_s=0.001,
    )
    runner.start()
    assert recorder.ending.wait(30)  # step 0's end is under way, and blocks
    acked[0] = 5
    assert wait_until(lambda: ("start", 1) in recorder.events, 30, interval_s=0.005)
    assert ("end", 0) not in recorder.events
    assert runner.is_alive()  # not done while an end is in flight
    recorder.release.set()
    runner.join(timeout=30)
    assert not runner.is_alive()
    assert runner.error is None
    assert recorder.events == [("start", 0), ("start", 1), ("end", 0)]


class SlowFirstStart(Recorder):
    """Step 0's start takes a while (a fault that takes time to put in place)."""

    def start(self, step: ResolvedStep) -> None:
        if step.index == 0:
            time.sleep(0.1)
        super().start(step)


def test_steps_due_at_one_trigger_start_in_their_order() -> None:
    """Two faults at one trigger are put in place one after the other, in the scenario's order
    (librdkafka-3584: the lost request, then the refused one)."""
    steps = kafka_steps(
        {"kind": "pause", "after_acked": 5, "target": "kafka-1", "duration": 0.5},
        {"kind": "pause", "after_acked": 5, "target": "kafka-2", "duration": 0.5},
    )
    recorder = SlowFirstStart()
    runner = TimelineRunner(
        steps, recorder, acked=lambda: 5, workload_done=lambda: False, tick_s=0.001
    )
    runner.start()
    runner.join(timeout=30)
    assert recorder.events == [("start", 0), ("start", 1), ("end", 0), ("end", 1)]
