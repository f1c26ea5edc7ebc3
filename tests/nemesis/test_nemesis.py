"""The nemesis plays every step kind on a fake lab, ends what has an end, heals the rest, and
judges from what it observed whether each step took effect."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeConsumers, FakeProxy, FakeRefbroker, FakeRuntime, FakeWorkload

from eoslab.fault_events import FaultEffect, read_events
from eoslab.nemesis.nemesis import Nemesis
from eoslab.nemesis.steps import (
    STEP_KINDS,
    consumer_join,
    delete_records,
    probe,
    transaction_hang,
)
from eoslab.nemesis.steps import kill as kill_step
from eoslab.nemesis.steps.base import ResolvedStep
from eoslab.nemesis.timeline import resolve
from eoslab.run_context import RunContext
from eoslab.rundir import LabTarget, RunDir
from eoslab.runtime.lab import ProcessState
from eoslab.scenarios.catalogue import ScenarioError, parse_scenario


class Lab:
    def __init__(self, tmp_path: Path, target: LabTarget) -> None:
        self.runtime = FakeRuntime()
        self.proxy = FakeProxy()
        self.refbroker = FakeRefbroker()
        self.workload = FakeWorkload()
        self.consumers = FakeConsumers()
        self.run_dir = RunDir(tmp_path / "run").create()
        context = RunContext(
            run_id=self.run_dir.run_id,
            run_dir=self.run_dir,
            target=target,
            lab_target=target,
            bootstrap="127.0.0.1:1",
            topic="t",
            partitions=3,
            seed=0,
        )
        self.nemesis = Nemesis(
            context,
            runtime=self.runtime,
            proxy=self.proxy,  # type: ignore[arg-type]
            refbroker=self.refbroker,  # type: ignore[arg-type]
            workload=self.workload,  # type: ignore[arg-type]
            consumers=self.consumers,  # type: ignore[arg-type]
        )

    def steps(
        self, target: LabTarget, *nemesis: dict[str, Any], transactional: bool = False
    ) -> list[ResolvedStep]:
        transactions: dict[str, Any] = {"transactions": {}} if transactional else {}
        scenario = parse_scenario(
            {
                "name": "fake",
                "description": "d",
                "targets": [target],
                "workload": {"producers": 2, **transactions},
                "consumers": {"consumers": 2, "mode": "dedup-table"},
                "nemesis": list(nemesis),
            },
            "fake",
        )
        return resolve(scenario.nemesis, target, seed=0)

    def logged(self) -> list[tuple[str, str | None, str]]:
        return [(e.kind, e.target, e.phase) for e in read_events(self.run_dir.faults_jsonl)]

    def effects(self, *steps: ResolvedStep) -> list[FaultEffect]:
        return self.nemesis.effects(steps)


def test_process_steps_break_their_ends_repair_and_each_shows_it_took_effect(
    tmp_path: Path,
) -> None:
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
    lab.nemesis.heal()
    assert len(lab.runtime.calls) == 5  # nothing left to heal
    assert lab.nemesis.errors == []
    assert lab.logged() == [
        ("kill", "kafka-2", "start"),
        ("pause", "kafka-3", "start"),
        ("restart", "kafka-1", "instant"),
        ("kill", "kafka-2", "end"),
        ("pause", "kafka-3", "end"),
    ]
    killed, paused, restarted = lab.effects(kill, pause, restart)
    pid = killed.observed["pids"]["kafka-2"]
    assert (killed.took_effect, killed.evidence) == (True, f"pid {pid} killed (SIGKILL)")
    assert killed.observed["restarted_pids"]["kafka-2"] not in (None, pid)
    assert paused.took_effect
    assert paused.evidence.startswith("pid ")
    assert paused.observed["paused_s"] >= 0
    before, after = restarted.observed["pids"]["kafka-1"]
    assert restarted.took_effect
    assert after not in (None, before)


def test_followers_are_every_other_replica_of_the_partition() -> None:
    with pytest.raises(ScenarioError, match="the reference broker has no followers"):
        parse_scenario(
            {
                "name": "alone",
                "description": "d",
                "targets": ["kafka", "refbroker"],
                "nemesis": [{"kind": "pause", "at": 0, "target": "followers", "duration": 1}],
            },
            "alone",
        )
    with pytest.raises(ScenarioError, match="restart acts on one service, not on followers"):
        parse_scenario(
            {
                "name": "alone",
                "description": "d",
                "targets": ["kafka"],
                "nemesis": [{"kind": "restart", "at": 0, "target": "followers"}],
            },
            "alone",
        )


def test_a_kill_the_target_never_applied_did_not_take_effect(tmp_path: Path) -> None:
    lab = Lab(tmp_path, "kafka")
    lab.runtime.kills_work = False
    (kill,) = lab.steps("kafka", {"kind": "kill", "at": 0, "target": "kafka-1", "duration": 1})
    lab.nemesis.start(kill)
    lab.nemesis.end(kill)
    (effect,) = lab.effects(kill)
    assert not effect.took_effect
    assert effect.evidence == "kafka-1 was running before the kill and running after"


def test_a_rolling_restart_goes_through_every_broker_of_the_target(tmp_path: Path) -> None:
    lab = Lab(tmp_path, "kafka")
    (step,) = lab.steps("kafka", {"kind": "rolling-restart", "at": 0, "interval": 0})
    lab.nemesis.start(step)
    assert lab.runtime.calls == [("restart", f"kafka-{i}") for i in (1, 2, 3)]
    assert lab.logged() == [("rolling-restart", "kafka-1,kafka-2,kafka-3", "instant")]
    (effect,) = lab.effects(step)
    assert effect.took_effect
    assert effect.evidence == "restarted kafka-1, kafka-2, kafka-3 (new pids)"


def test_heal_ends_what_is_still_broken_last_broken_first(tmp_path: Path) -> None:
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
    lab.refbroker.cache_differs = 1  # a retry answered otherwise than by Kafka's cache
    assert lab.proxy.active == {"f1": {"kind": "blackhole", "route": "*"}}
    assert lab.refbroker.applied == [{"kind": "retained-batches", "count": 1}]
    lab.nemesis.heal()
    assert lab.nemesis.errors == []
    assert lab.runtime.calls == [
        ("kill", "refbroker"),
        ("pause", "refbroker"),
        ("resume", "refbroker"),
        ("restart", "refbroker"),
    ]
    assert lab.proxy.active == {}
    assert lab.refbroker.cleared == 1  # back to the broker's configured duplicate window
    healed = [e for e in read_events(lab.run_dir.faults_jsonl) if e.detail.get("healed")]
    assert [e.step for e in healed] == [3, 2, 1, 0]
    assert all(effect.took_effect for effect in lab.effects(*steps))  # evidence read at heal
    lab.nemesis.heal()  # a second heal has nothing left to do
    assert len(lab.runtime.calls) == 4


def test_a_step_that_fails_is_logged_did_not_take_effect_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
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
    lab.nemesis.heal()  # the failed kill broke nothing
    assert lab.runtime.calls == [("restart", "kafka-2")]
    failed, restarted = lab.effects(kill, restart)
    assert (failed.took_effect, failed.evidence) == (False, "start failed: kafka-1 refuses")
    assert restarted.took_effect
    assert ("kill", "kafka-1", "failed") in lab.logged()


def test_proxy_steps_take_effect_only_when_their_fault_fired(tmp_path: Path) -> None:
    lab = Lab(tmp_path, "refbroker")
    fired, silent = lab.steps(
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
    )
    lab.nemesis.start(fired)
    lab.nemesis.start(silent)
    lab.nemesis.end(fired)
    assert list(lab.proxy.active) == ["f2"]  # the overlapping step's fault stays
    lab.proxy.injected = 0
    lab.nemesis.end(silent)
    assert lab.proxy.active == {}
    done, missed = lab.effects(fired, silent)
    assert done.took_effect
    assert done.evidence == "reset connections at 3 Produce on 1 connection(s)"
    assert done.observed["frames"] == {"Produce": {"7": 3}}
    assert not missed.took_effect
    assert missed.evidence == "delay never fired (7 matching frame(s) seen)"
    ends = [e for e in read_events(lab.run_dir.faults_jsonl) if e.phase == "end"]
    assert [(e.kind, e.detail["injected"]) for e in ends] == [
        ("proxy:reset", 3),
        ("proxy:delay", 0),
    ]


def test_refbroker_steps_judge_their_fault_by_the_brokers_counters(tmp_path: Path) -> None:
    lab = Lab(tmp_path, "refbroker")
    drop, unused, rules = lab.steps(
        "refbroker",
        {
            "kind": "refbroker",
            "at": 0,
            "duration": 1,
            "fault": {"kind": "drop-response", "api": "Produce", "count": 2},
        },
        {
            "kind": "refbroker",
            "at": 0,
            "duration": 1,
            "fault": {"kind": "drop-response", "api": "Produce", "count": 2},
        },
        {
            "kind": "refbroker",
            "at": 0,
            "duration": 1,
            "fault": {"kind": "rules", "rules": "kafka-2.0"},
        },
    )
    lab.nemesis.start(drop)
    lab.refbroker.dropped = 2  # two Produce responses swallowed meanwhile
    lab.nemesis.end(drop)
    lab.nemesis.start(unused)
    lab.nemesis.end(unused)
    lab.nemesis.start(rules)
    lab.refbroker.judged = {"kafka-3.9": 7, "kafka-2.0": 4}  # batches judged meanwhile
    lab.nemesis.end(rules)
    assert lab.refbroker.cleared == 3
    consumed, idle, set_rules = lab.effects(drop, unused, rules)
    assert consumed.took_effect
    assert consumed.evidence == "swallowed the responses to 2 of 2 Produce request(s)"
    assert not idle.took_effect
    assert idle.evidence == "armed for 2 Produce request(s), none came"
    assert set_rules.took_effect
    assert set_rules.evidence == "4 batch(es) judged by the kafka-2.0 producer-state rules"


@pytest.mark.parametrize(
    ("fault", "evidence"),
    [
        ({"kind": "rules", "rules": "legacy"}, "rules legacy in force, but no batch was judged"),
        (
            {"kind": "retained-batches", "count": 1},
            "no retry was answered otherwise than by Kafka's 5",
        ),
        ({"kind": "crash-restart"}, "nothing to reload: reloaded 0 record(s)"),
    ],
    ids=["rules-unused", "cache-never-differed", "restart-reloaded-nothing"],
)
def test_a_refbroker_state_fault_applied_but_never_met_did_not_take_effect(
    tmp_path: Path, fault: dict[str, Any], evidence: str
) -> None:
    """Being applied is no evidence: a rule set no batch was judged by, a duplicate cache whose
    answers never differed from Kafka's, a restart of a broker holding nothing."""
    lab = Lab(tmp_path, "refbroker")
    lab.refbroker.judged = {"kafka-3.9": 12}  # batches, but under the configured rules
    lab.refbroker.reloaded = {"partitions": 0, "records": 0, "producers": 0}
    (step,) = lab.steps("refbroker", {"kind": "refbroker", "at": 0, "duration": 1, "fault": fault})
    lab.nemesis.start(step)
    lab.nemesis.end(step)
    (effect,) = lab.effects(step)
    assert not effect.took_effect
    assert evidence in effect.evidence


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
    first, second = lab.effects(at_once, later)
    assert first.took_effect
    assert first.observed["in_flight"] == 5
    assert second.observed["restarted"] == "s4"


def test_an_idempotent_producer_killed_with_nothing_in_flight_did_not_crash(
    tmp_path: Path,
) -> None:
    lab = Lab(tmp_path, "kafka")
    lab.workload.in_flight = 0
    (crash,) = lab.steps("kafka", {"kind": "producer-crash", "at": 0, "producer": 0})
    lab.nemesis.start(crash)
    (effect,) = lab.effects(crash)
    assert not effect.took_effect
    assert effect.evidence.endswith(
        "0 record(s) in flight: nothing in flight for the crash to leave uncertain"
    )


def test_a_transactional_producer_must_be_killed_inside_a_transaction(tmp_path: Path) -> None:
    lab = Lab(tmp_path, "kafka")
    lab.workload.transactional = True
    inside, between = lab.steps(
        "kafka",
        {"kind": "producer-crash", "at": 0, "producer": 0},
        {"kind": "producer-crash", "at": 0, "producer": 1},
        transactional=True,
    )
    lab.nemesis.start(inside)
    lab.workload.left_open = None  # the next one dies between two transactions
    lab.nemesis.start(between)
    first, second = lab.effects(inside, between)
    assert first.took_effect
    assert "transaction 3 open (20 records)" in first.evidence
    assert first.observed["open_txn"] == {"txn": 3, "records": 20}
    assert not second.took_effect
    assert "between two transactions" in second.evidence


ZOMBIE = {"kind": "producer-zombie", "at": 0, "producer": 1, "duration": 4}


def test_a_zombie_producer_is_frozen_mid_transaction_taken_over_and_fenced(
    tmp_path: Path,
) -> None:
    lab = Lab(tmp_path, "kafka")
    (zombie,) = lab.steps("kafka", ZOMBIE, transactional=True)
    lab.nemesis.start(zombie)
    assert lab.workload.calls == [("freeze", 1), ("take_over", 1)]
    (effect,) = lab.effects(zombie)
    assert not effect.took_effect  # not until the zombie is seen fenced
    lab.nemesis.end(zombie)
    assert lab.workload.calls[-1] == ("resume", 1)
    assert [e[1:] for e in lab.logged()] == [("producer-1", "start"), ("producer-1", "end")]
    (effect,) = lab.effects(zombie)
    assert effect.took_effect, effect.evidence
    assert "in transaction 7 (producer (4, 0)); session nnnnnnnn initialised (4, 2)" in (
        effect.evidence
    )
    assert effect.evidence.endswith("the zombie ended on _FENCED, its transaction aborted")
    assert effect.observed["zombie_txn_outcome"] == "aborted"


def resumed_zombie(
    tmp_path: Path, late_errors: dict[str, int], *, fenced: bool = True
) -> FaultEffect:
    """The zombie step played through, its late writes answered ``late_errors`` (any: its
    transaction aborted without a fatal error), or not ``fenced`` (committed): its effect."""
    lab = Lab(tmp_path, "kafka")
    lab.workload.late_errors = late_errors
    lab.workload.fenced = fenced
    (zombie,) = lab.steps("kafka", ZOMBIE, transactional=True)
    lab.nemesis.start(zombie)
    lab.nemesis.end(zombie)
    (effect,) = lab.effects(zombie)
    return effect


def test_a_zombie_whose_late_writes_are_refused_and_that_recovers_by_itself_was_fenced(
    tmp_path: Path,
) -> None:
    effect = resumed_zombie(tmp_path, {"INVALID_PRODUCER_EPOCH": 4})
    assert effect.took_effect, effect.evidence
    assert "its late writes were refused (INVALID_PRODUCER_EPOCH)" in effect.evidence
    assert effect.observed["zombie_fatal"] is None
    assert effect.observed["zombie_late_errors"] == {"INVALID_PRODUCER_EPOCH": 4}


def test_a_zombie_whose_late_writes_met_another_error_was_not_fenced(tmp_path: Path) -> None:
    effect = resumed_zombie(tmp_path, {"_MSG_TIMED_OUT": 4})
    assert not effect.took_effect
    assert effect.evidence.endswith("the resumed zombie ended on no fatal error, not fenced")


def test_a_zombie_producer_that_is_not_fenced_did_not_take_effect(tmp_path: Path) -> None:
    effect = resumed_zombie(tmp_path, {}, fenced=False)
    assert not effect.took_effect
    assert "its transaction committed" in effect.evidence
    assert effect.evidence.endswith("the resumed zombie ended on no fatal error, not fenced")


def test_a_producer_that_never_freezes_is_no_zombie_and_is_not_taken_over(
    tmp_path: Path,
) -> None:
    lab = Lab(tmp_path, "kafka")
    lab.workload.freezes = False
    (zombie,) = lab.steps("kafka", ZOMBIE, transactional=True)
    lab.nemesis.start(zombie)
    lab.nemesis.heal()  # wakes it, in case it froze after all
    assert lab.workload.calls == [("freeze", 1), ("resume", 1)]
    (effect,) = lab.effects(zombie)
    assert not effect.took_effect
    assert "never froze in an open transaction" in effect.evidence


def test_a_zombie_producer_needs_transactional_producers_and_an_end(tmp_path: Path) -> None:
    lab = Lab(tmp_path, "kafka")
    with pytest.raises(ScenarioError, match="kind: producer-zombie needs transactional producers"):
        lab.steps("kafka", ZOMBIE)
    with pytest.raises(ScenarioError, match="duration: a producer zombie needs a duration"):
        lab.steps("kafka", {**ZOMBIE, "duration": None}, transactional=True)
    with pytest.raises(ScenarioError, match="producer: 2, but the workload has 2 producer"):
        lab.steps("kafka", {**ZOMBIE, "producer": 2}, transactional=True)
    assert lab.steps("kafka", ZOMBIE, transactional=True)[0].duration_s == 4


HANG = {"kind": "transaction-hang", "at": 0, "producer": 0, "duration": 15}


def test_a_hanging_transaction_needs_transactional_producers_and_to_outlast_their_timeout(
    tmp_path: Path,
) -> None:
    lab = Lab(tmp_path, "kafka")
    with pytest.raises(ScenarioError, match="kind: transaction-hang needs transactional"):
        lab.steps("kafka", HANG)
    with pytest.raises(ScenarioError, match="duration: a hanging transaction needs a duration"):
        lab.steps("kafka", {**HANG, "duration": None}, transactional=True)
    # the default transaction.timeout.ms is 10 s: 13 s leaves too little for the abort
    with pytest.raises(ScenarioError, match=r"duration: 13 s; .* transaction.timeout.ms \(10 s\)"):
        lab.steps("kafka", {**HANG, "duration": 13}, transactional=True)
    assert lab.steps("kafka", HANG, transactional=True)[0].duration_s == 15


def test_a_producer_that_never_freezes_leaves_no_transaction_hanging(tmp_path: Path) -> None:
    lab = Lab(tmp_path, "kafka")
    lab.workload.freezes = False
    (hang,) = lab.steps("kafka", HANG, transactional=True)
    lab.nemesis.start(hang)
    lab.nemesis.heal()
    assert lab.workload.calls == [("freeze", 0)]  # nothing to kill or restart
    (effect,) = lab.effects(hang)
    assert not effect.took_effect
    assert "never froze in an open transaction" in effect.evidence


def _samples(*points: tuple[int, int, int]) -> list[transaction_hang.OffsetsSample]:
    """(ms after the transaction began, last stable offset, high watermark) of partition 1."""
    return [transaction_hang.OffsetsSample(at, {1: lso}, {1: hw}) for at, lso, hw in points]


HELD_THEN_RELEASED = _samples((500, 40, 45), (3000, 40, 90), (6200, 40, 120), (6500, 121, 121))


def test_a_hanging_transaction_is_judged_by_the_partitions_it_held() -> None:
    judged = transaction_hang.judge_hang(HELD_THEN_RELEASED, {1: 42}, 0, 6000)
    assert judged.took_effect, judged.evidence
    assert judged.evidence == (
        "open transaction held partition 1 at 42 (80 records held back); released by the "
        "coordinator after 6.5 s (transaction.timeout.ms 6000)"
    )
    assert judged.observed["released_after_s"] == {1: 6.5}


@pytest.mark.parametrize(
    ("samples", "first", "why"),
    [
        (HELD_THEN_RELEASED[:3], {1: 42}, "still 40 (the transaction's first record at 42) 6.2 s"),
        (_samples((500, 40, 45), (2000, 60, 60)), {1: 42}, "released 2 s after the transaction"),
        (_samples((500, 50, 60), (7000, 60, 60)), {1: 42}, "never seen held at offset 42"),
        (HELD_THEN_RELEASED, {}, "none of the transaction's records reached the log"),
    ],
    ids=["never-aborted", "aborted-before-its-timeout", "never-held", "nothing-in-the-log"],
)
def test_a_transaction_never_released_or_released_early_or_never_held_did_not_take_effect(
    samples: list[transaction_hang.OffsetsSample], first: dict[int, int], why: str
) -> None:
    judged = transaction_hang.judge_hang(samples, first, 0, 6000)
    assert not judged.took_effect
    assert why in judged.evidence


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
    lab.nemesis.heal()  # the frozen consumer is resumed
    assert lab.consumers.calls[-1] == ("resume", 0)
    assert ("consumer-join", "consumer-2", "end") in lab.logged()
    effects = lab.effects(crash, crash_later, pause, join)
    assert all(effect.took_effect for effect in effects)
    assert effects[2].evidence.endswith("the group moved from generation 1 to 3 without it")
    assert effects[3].evidence == "consumer-2 joined: generation 2 -> 3"


def test_a_consumer_crash_that_misses_its_point_did_not_take_effect(tmp_path: Path) -> None:
    """A consumer with nothing left to process cannot die between an effect and its commit:
    the step did not inject its fault, and says so (the run is invalid)."""
    lab = Lab(tmp_path, "kafka")
    lab.consumers.effects_after_arming = False
    (crash,) = lab.steps("kafka", {"kind": "consumer-crash", "at": 0, "consumer": 0})
    lab.nemesis.start(crash)
    assert lab.consumers.calls == [("crash", 0), ("restart", 0)]
    (effect,) = lab.effects(crash)
    assert not effect.took_effect
    assert "not killed between an effect and its commit" in effect.evidence


@pytest.mark.parametrize(
    ("at_crash", "took_effect", "evidence"),
    [
        (
            {"left_in_batch": 3, "received": {"0": 120}, "committed": {"0": 120}},
            True,
            "consumer-0 killed with 3 records of its batch unprocessed, the auto-commit past "
            "every record handed out (generation 1)",
        ),
        (  # the end of a batch: every record handed out was processed
            {"left_in_batch": 0, "received": {"0": 120}, "committed": {"0": 120}},
            False,
            "consumer-0 killed with 0 records of its batch unprocessed, the auto-commit past "
            "every record handed out (generation 1)",
        ),
        (
            {"left_in_batch": 3, "received": {"0": 120, "1": 95}, "committed": {"0": 117}},
            False,
            "consumer-0 killed with 3 records of its batch unprocessed: the auto-commit had not "
            "committed past partitions [0, 1]",
        ),
    ],
)
def test_an_auto_commit_crash_leaves_records_handed_out_and_committed_past_unprocessed(
    tmp_path: Path, at_crash: dict[str, Any], took_effect: bool, evidence: str
) -> None:
    lab = Lab(tmp_path, "kafka")
    lab.consumers.auto_commit = True
    lab.consumers.at_crash = at_crash
    (crash,) = lab.steps("kafka", {"kind": "consumer-crash", "at": 0, "consumer": 0})
    lab.nemesis.start(crash)
    (effect,) = lab.effects(crash)
    assert (effect.took_effect, effect.evidence) == (took_effect, evidence)


def test_a_frozen_consumer_the_group_never_evicted_is_no_zombie(tmp_path: Path) -> None:
    lab = Lab(tmp_path, "kafka")
    lab.consumers.evicts = False
    (pause,) = lab.steps(
        "kafka", {"kind": "consumer-pause", "at": 0, "consumer": 0, "duration": 10}
    )
    lab.nemesis.start(pause)
    lab.nemesis.end(pause)
    (effect,) = lab.effects(pause)
    assert not effect.took_effect
    assert "it was never evicted" in effect.evidence


def test_each_consumer_join_needs_a_rebalance_of_its_own(tmp_path: Path) -> None:
    """Two consumers let in by one rebalance are one rebalance: the second join did not take
    effect."""
    lab = Lab(tmp_path, "kafka")
    lab.consumers.rebalances = False
    first, second = lab.steps(
        "kafka",
        {"kind": "consumer-join", "at": 0, "duration": 3},
        {"kind": "consumer-join", "at": 0, "duration": 3},
    )
    lab.nemesis.start(first)
    lab.nemesis.start(second)
    lab.nemesis.end(first)
    lab.nemesis.end(second)
    own, shared = lab.effects(first, second)
    assert (own.took_effect, own.evidence) == (True, "consumer-2 joined: generation 1 -> 2")
    assert not shared.took_effect
    assert shared.evidence == (
        "consumer-3 was admitted in generation 2 by the rebalance that admitted step 0's "
        "consumer: no rebalance of its own"
    )


def test_a_join_waits_for_the_group_to_settle_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A join starts once the group has settled from what came before (bounded), so that two
    joins seconds apart on a loaded machine are not one rebalance; it says whether it had."""
    monkeypatch.setattr(consumer_join.ConsumerJoinStep, "settle_wait_s", 0.5)
    lab = Lab(tmp_path, "kafka")
    lab.consumers.formed = False
    settling = threading.Timer(0.2, lambda: setattr(lab.consumers, "formed", True))
    settling.start()
    first, second = lab.steps(
        "kafka",
        {"kind": "consumer-join", "at": 0, "duration": 3},
        {"kind": "consumer-join", "at": 0, "duration": 3},
    )
    lab.nemesis.start(first)
    assert lab.consumers.formed  # it waited for the group
    lab.consumers.formed = False  # and the next one finds it never settling: joins all the same
    lab.nemesis.start(second)
    assert lab.consumers.calls == [("join", 2), ("join", 3)]
    waited, did_not = lab.effects(first, second)
    assert waited.observed["settled_before"] is True
    assert did_not.observed["settled_before"] is False


def test_a_join_is_judged_by_the_first_generation_above_the_groups(tmp_path: Path) -> None:
    """A new KIP-848 member can first report the group's epoch of before its join (CI's
    rebalance-storm on Kafka 4: consumer-4 reported epoch 7, the group's at the step's start,
    then 8, its own rebalance): admitted in 8; a consumer only ever in the old epoch was not."""
    lab = Lab(tmp_path, "kafka")
    lab.consumers.reports_epoch_before = True
    (join,) = lab.steps("kafka", {"kind": "consumer-join", "at": 0, "duration": 3})
    lab.nemesis.start(join)
    lab.nemesis.end(join)
    (effect,) = lab.effects(join)
    assert (effect.took_effect, effect.evidence) == (True, "consumer-2 joined: generation 1 -> 2")


def test_a_consumer_never_in_a_newer_generation_was_not_admitted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = Lab(tmp_path, "kafka")
    (join,) = lab.steps("kafka", {"kind": "consumer-join", "at": 0, "duration": 3})
    lab.nemesis.start(join)
    lab.consumers.admitted[2] = [1]  # only ever in the group's generation of before
    monkeypatch.setattr(consumer_join, "JOIN_WAIT_S", 0.2)
    lab.nemesis.end(join)
    (effect,) = lab.effects(join)
    assert not effect.took_effect
    assert effect.evidence == (
        "consumer-2 came and went without being admitted by a rebalance (the group in "
        "generation 2; consumer-2 a member in [1])"
    )


@pytest.mark.parametrize(
    ("to", "sought", "took_effect", "evidence"),
    [
        (
            "beginning",
            {"partition": 1, "from": 300, "to": 0},
            True,
            "consumer-0 sought partition 1 from 300 back to 0 (its log start)",
        ),
        (
            "beginning",
            {"partition": 1, "from": 0, "to": 0},
            False,
            "consumer-0 sought partition 1 from 0 back to 0 (its log start): it did not move",
        ),
        (
            "forward",
            {"partition": 2, "from": 40, "to": 50},
            True,
            "consumer-0 sought partition 2 from 40 forward to 50",
        ),
        (
            "forward",
            {"partition": 2, "from": 40, "to": 40},
            False,
            "consumer-0 sought partition 2 from 40 forward to 40: it did not move",
        ),
        ("forward", None, False, "consumer-0 applied no effect to seek after"),
    ],
    ids=["rewound", "nowhere-back", "skipped", "nothing-to-skip", "no-effect"],
)
def test_a_consumer_seek_takes_effect_when_the_consumer_moved(
    tmp_path: Path,
    to: str,
    sought: dict[str, int] | None,
    took_effect: bool,
    evidence: str,
) -> None:
    lab = Lab(tmp_path, "kafka")
    lab.consumers.sought = sought
    (seek,) = lab.steps("kafka", {"kind": "consumer-seek", "at": 0, "consumer": 0, "to": to})
    lab.nemesis.start(seek)
    assert lab.consumers.calls == [(f"seek {'back' if to == 'beginning' else 'forward'}", 0)]
    (effect,) = lab.effects(seek)
    assert (effect.took_effect, effect.evidence) == (took_effect, evidence)


LEADER_KILL = {"kind": "kill", "at": 0, "target": "leader", "partition": 0, "duration": 6}


@pytest.mark.parametrize(
    ("leaders", "took_effect", "evidence"),
    [
        (["kafka-1", "kafka-2"], True, "leadership of partition 0 moved from kafka-1 to kafka-2"),
        (
            ["kafka-1", "kafka-1", "kafka-3"],
            True,
            "leadership of partition 0 moved from kafka-1 to kafka-3",
        ),
        (
            ["kafka-1", "kafka-1", "kafka-1"],
            False,
            "but kafka-1 still led partition 0 after the fault (seen: kafka-1, kafka-1): "
            "leadership never moved",
        ),
    ],
    ids=["moved-during-the-kill", "moved-once-its-session-ended", "never-moved"],
)
def test_a_leader_kill_takes_effect_when_leadership_moved(
    tmp_path: Path, leaders: list[str], took_effect: bool, evidence: str
) -> None:
    """The leader looked up at the kill, at its end, and (if it had not moved yet) once the
    broker is back."""
    lab = Lab(tmp_path, "kafka")
    lab.nemesis.leader_of = lambda partition: leaders.pop(0)  # type: ignore[method-assign]
    (kill,) = lab.steps("kafka", LEADER_KILL)
    lab.nemesis.start(kill)
    lab.nemesis.end(kill)
    (effect,) = lab.effects(kill)
    assert effect.took_effect is took_effect
    assert effect.evidence.endswith(evidence)
    assert leaders == []


def test_a_leader_pause_takes_effect_when_leadership_moved_and_one_node_cannot_move_it(
    tmp_path: Path,
) -> None:
    lab = Lab(tmp_path, "kafka")
    lab.nemesis.leader_of = lambda partition: "kafka-2"  # type: ignore[method-assign]
    (pause,) = lab.steps("kafka", {**LEADER_KILL, "kind": "pause"})
    lab.nemesis.start(pause)
    lab.nemesis.end(pause)
    (effect,) = lab.effects(pause)
    assert not effect.took_effect  # still kafka-2 at its end: only slow, never replaced
    assert effect.evidence.endswith("leadership never moved")
    alone = Lab(tmp_path / "alone", "refbroker")
    (pause,) = alone.steps("refbroker", {**LEADER_KILL, "kind": "pause"})
    alone.nemesis.start(pause)
    alone.nemesis.end(pause)
    (effect,) = alone.effects(pause)
    assert effect.took_effect
    assert effect.evidence.endswith("stopped (SIGSTOP); one node: leadership has nowhere to move")


@pytest.mark.parametrize(
    ("unsettled", "took_effect", "evidence"),
    [
        (
            [{"txn": 4, "records": 20, "ending": False}],
            True,
            "inside transaction 4 of producer 0 (open)",
        ),
        (
            [{"txn": 4, "records": 20, "ending": True}],
            True,
            "inside transaction 4 of producer 0 (its commit or abort under way)",
        ),
        ([None], False, "between two transactions of producer 0"),
        (
            [{"txn": 4, "records": 20, "ending": True}, {"txn": 5, "records": 20, "ending": False}],
            True,
            "inside transaction 5 of producer 0 (open)",
        ),
        (
            [
                {"txn": 4, "records": 20, "ending": False},
                {"txn": 5, "records": 20, "ending": False},
            ],
            False,
            "between two transactions of producer 0",
        ),
    ],
    ids=["open", "ending", "between-two", "waits-for-an-open-one", "settled-before-the-kill"],
)
def test_a_transaction_coordinator_kill_must_land_inside_a_transaction(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    unsettled: list[dict[str, Any] | None],
    took_effect: bool,
    evidence: str,
) -> None:
    """The kill waits for an open transaction (here a moment: none opens in the fake), then
    must still find it unsettled after the kill."""
    monkeypatch.setattr(kill_step, "OPEN_WAIT_S", 0.05)
    lab = Lab(tmp_path, "kafka")
    lab.workload.unsettled = unsettled
    lab.nemesis.txn_coordinator = lambda: "kafka-3"  # type: ignore[method-assign]
    (kill,) = lab.steps("kafka", {**LEADER_KILL, "target": "txn-coordinator"}, transactional=True)
    lab.nemesis.start(kill)
    lab.nemesis.end(kill)
    (effect,) = lab.effects(kill)
    assert effect.took_effect is took_effect
    assert evidence in effect.evidence


def test_a_group_coordinator_kill_must_land_inside_a_group_generation(tmp_path: Path) -> None:
    lab = Lab(tmp_path, "kafka")
    lab.nemesis.coordinator = lambda: "kafka-1"  # type: ignore[method-assign]
    formed, forming = lab.steps(
        "kafka",
        {**LEADER_KILL, "target": "coordinator"},
        {**LEADER_KILL, "target": "coordinator"},
    )
    lab.nemesis.start(formed)
    lab.nemesis.end(formed)
    lab.consumers.formed = False
    lab.nemesis.start(forming)
    lab.nemesis.end(forming)
    live, rebalancing = lab.effects(formed, forming)
    assert live.took_effect
    assert live.evidence.endswith("killed (SIGKILL), the group in generation 1")
    assert not rebalancing.took_effect
    assert "the group was not formed in a generation (generation 1)" in rebalancing.evidence


def test_skipped_and_unstarted_steps_did_not_take_effect(tmp_path: Path) -> None:
    lab = Lab(tmp_path, "kafka")
    skipped, unstarted = lab.steps(
        "kafka",
        {"kind": "restart", "after_acked": 5, "target": "kafka-1"},
        {"kind": "restart", "after_acked": 6, "target": "kafka-2"},
    )
    lab.nemesis.skip(skipped, "the workload finished before its trigger")
    assert lab.logged() == [("restart", "kafka-1", "skipped")]
    first, second = lab.effects(skipped, unstarted)
    assert (first.took_effect, first.evidence) == (
        False,
        "skipped: the workload finished before its trigger",
    )
    assert (second.took_effect, second.evidence) == (
        False,
        "never started: the run ended before its trigger",
    )


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

    def fake_probe(**where: Any) -> dict[str, Any]:
        played.append(where)
        return {
            "answers": [
                {"tag": "a", "error": "NONE"},
                {"tag": "b", "error": "OUT_OF_ORDER_SEQUENCE_NUMBER"},
            ]
        }

    monkeypatch.setitem(probe.SCENARIO_PROBES, "seq-jump", fake_probe)
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
    (effect,) = lab.effects(step)
    assert not effect.took_effect  # the refusal came, but not for the jump
    assert effect.evidence == (
        "seq-jump: 2 Produce answer(s), errors OUT_OF_ORDER_SEQUENCE_NUMBER; never provoked: "
        "sequence 111 refused with OUT_OF_ORDER_SEQUENCE_NUMBER"
    )


@pytest.mark.parametrize(
    ("answers", "took_effect"),
    [
        (
            [{"tag": "A", "error": "NONE"}] * 7
            + [{"tag": "A", "error": "OUT_OF_ORDER_SEQUENCE_NUMBER"}],
            True,
        ),
        ([{"tag": "A", "error": "NONE"}] * 8, False),  # a cache that answered the retry
        ([{"tag": "B", "error": "OUT_OF_ORDER_SEQUENCE_NUMBER"}], False),
        ([{"tag": "A", "error": "NOT_LEADER_OR_FOLLOWER"}], False),
        ([], False),
    ],
    ids=["refused", "answered-from-a-cache", "another-batch-refused", "another-error", "silent"],
)
def test_a_probe_takes_effect_only_when_the_broker_gave_the_answer_it_exists_to_provoke(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    answers: list[dict[str, Any]],
    took_effect: bool,
) -> None:
    lab = Lab(tmp_path, "kafka")
    monkeypatch.setitem(probe.SCENARIO_PROBES, "inflight-6", lambda **_: {"answers": answers})
    (step,) = lab.steps("kafka", {"kind": "probe", "at": 0, "probe": "inflight-6"})
    lab.nemesis.start(step)
    (effect,) = lab.effects(step)
    assert effect.took_effect is took_effect


def test_delete_records_takes_effect_when_the_log_start_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = Lab(tmp_path, "kafka")
    starts = {0: 120, 1: 0, 2: 98}
    monkeypatch.setattr(
        delete_records,
        "delete_records",
        lambda bootstrap, topic, partitions: {p: starts[p] for p in partitions},
    )
    moved, empty = lab.steps(
        "kafka",
        {"kind": "delete-records", "at": 0, "partitions": [0, 2]},
        {"kind": "delete-records", "at": 0},
    )
    lab.nemesis.start(moved)
    lab.nemesis.start(empty)
    done, undone = lab.effects(moved, empty)
    assert (done.took_effect, done.evidence) == (
        True,
        "log start moved to 120 on partition 0, 98 on partition 2",
    )
    assert not undone.took_effect  # partition 1 had nothing to delete


def test_every_step_kind_is_covered_here() -> None:
    source = Path(__file__).read_text()
    assert all(f'"kind": "{kind}"' in source for kind in STEP_KINDS)


def test_partitions_are_refused_where_links_cannot_be_cut_and_a_heal_has_nothing_to_heal(
    tmp_path: Path,
) -> None:
    """The fake lab's runtime cannot cut links (the compose runtime neither), nor slow them or
    make them lossy: the steps fail with the reason, never silently skipped, and did not take
    effect; the run goes on."""
    lab = Lab(tmp_path, "kafka")
    steps = lab.steps(
        "kafka",
        {"kind": "partition", "at": 0, "shape": "isolate-leader"},
        {"kind": "link-delay", "at": 0, "shape": "isolate-leader", "delay_ms": 100},
        {"kind": "link-loss", "at": 0, "shape": "isolate-leader", "probability": 0.3},
        {"kind": "heal", "at": 1},
    )
    for step in steps:
        lab.nemesis.start(step)
    refused = "the FakeRuntime cannot cut links between the lab's nodes"
    assert [refused in error for error in lab.nemesis.errors] == [True] * 4
    assert not any(effect.took_effect for effect in lab.effects(*steps))
    logged = lab.logged()
    for kind in ("partition", "link-delay", "link-loss"):
        assert (kind, "leader", "failed") in logged


@pytest.mark.parametrize(("kind", "undo"), [("pause", "resume"), ("kill", "restart")])
def test_a_step_whose_start_fails_on_a_follower_undoes_it_on_the_ones_before(
    tmp_path: Path, kind: str, undo: str
) -> None:
    """Two followers, the lab tracking no process of the second (its record lost): the start
    fails there, and the first is at once resumed (restarted), not left frozen (dead) past
    the run with nothing registered to heal it; the step's end then has nothing to end."""
    lab = Lab(tmp_path, "kafka")
    lab.nemesis.resolve_target = lambda name, partition=0: ["kafka-3", "kafka-1"]  # type: ignore[method-assign]
    lab.runtime.untracked.add("kafka-1")
    (step,) = lab.steps(
        "kafka", {"kind": kind, "at": 0, "target": "followers", "partition": 0, "duration": 3}
    )
    lab.nemesis.start(step)
    assert lab.runtime.calls == [(kind, "kafka-3"), (kind, "kafka-1"), (undo, "kafka-3")]
    assert lab.runtime.observe("kafka-3").state is ProcessState.RUNNING
    assert lab.nemesis.errors == [f"step 0 ({kind}) start: kafka-1 is not running"]
    lab.nemesis.end(step)  # at the step's end: nothing to end (a pause has no time to read)
    lab.nemesis.heal()
    assert lab.runtime.calls[3:] == []  # nothing left broken to heal
    assert lab.nemesis.errors == [f"step 0 ({kind}) start: kafka-1 is not running"]
    (effect,) = lab.effects(step)
    assert not effect.took_effect
