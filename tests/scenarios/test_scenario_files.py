"""Scenario files: the whole catalogue loads; a bad file is refused naming file, field, reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from eoslab.rundir import CONSUMER_ANOMALIES, COPY_ANOMALIES, PRODUCER_ANOMALIES
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.topology import LabConfig
from eoslab.scenarios.catalogue import ScenarioError, catalogue, find_scenario, load_scenario
from eoslab.scenarios.command import app
from eoslab.scenarios.executor import RunError, execute, plan

CATALOGUE = [
    "baseline",
    "lost-acks",
    "lost-request",
    "inflight-6",
    "seq-jump",
    "producer-restart",
    "unknown-producer-id",
    "leader-kill",
    "leader-pause",
    "leader-partition",
    "controller-kill",
    "rolling-restart",
    "no-idempotence",
    "acks-1",
    "leader-alone",
    "kafka-7190",
    "librdkafka-3584",
    "redpanda-3039",
    "message-timeout",
    "not-enough-replicas-after-write",
    "not-enough-replicas-no-idempotence",
    "consumer-crash-before-commit",
    "auto-commit-crash",
    "rebalance-storm",
    "zombie-consumer",
    "coordinator-kill",
    "lost-commit",
    "idempotent-stale-skip",
    "txn-baseline",
    "txn-coordinator-kill",
    "txn-lost-answers",
    "txn-commit-unknown-outcome",
    "txn-read-uncommitted",
    "txn-producer-restart",
    "txn-zombie-producer",
    "txn-hanging-transaction",
    "txn-copy-coordinator-kill",
    "txn-copy-at-least-once",
    "leader-isolated",
    "leader-isolated-acks-1",
    "zk-session-loss",
    "quorum-minority",
    "partition-rolling",
    "txn-coordinator-isolated",
    "group-coordinator-isolated",
    "kafka-14417",
    "kafka-12152",
    "franz-go-1217",
    "librdkafka-4953",
    "kafka-17754",
    "consumer-seek",
    "replication-delay",
    "replication-loss",
]
NEGATIVE_CONTROLS = [
    "lost-request-no-idempotence",
    "replication-delay-no-idempotence",
    "replication-loss-no-idempotence",
    "leader-pause-acks-1",
    "leader-partition-no-idempotence",
    "zk-session-loss-acks-1",
    "controller-kill-no-idempotence",
    "rolling-restart-no-idempotence",
    "producer-restart-no-idempotence",
    "halves-no-idempotence",
    "quorum-minority-uncommitted",
    "txn-coordinator-kill-uncommitted",
    "txn-lost-answers-uncommitted",
    "txn-commit-unknown-outcome-uncommitted",
    "txn-isolated-uncommitted",
    "txn-hanging-uncommitted",
    "txn-producer-restart-uncommitted",
    "txn-copy-kill-at-least-once",
    "coordinator-kill-at-least-once",
    "lost-commit-at-least-once",
    "rebalance-storm-at-least-once",
    "group-isolated-at-least-once",
]
"""The negative controls of positive scenarios that had none (issue 32): each shares its
positive's fault (tests/scenarios/test_catalogue.py)."""
CATALOGUE += NEGATIVE_CONTROLS


def test_the_catalogue_has_every_scenario_of_the_architecture() -> None:
    assert sorted(catalogue()) == sorted(CATALOGUE)


@pytest.mark.parametrize("name", CATALOGUE)
def test_every_catalogue_file_loads_and_is_small(name: str) -> None:
    scenario = find_scenario(name)
    assert scenario.name == name
    assert scenario.workload.records is not None
    assert scenario.workload.records <= 5000
    for target in scenario.targets:
        for mode in scenario.run_modes:
            expected = scenario.expected.for_run(target, mode)
            assert set(PRODUCER_ANOMALIES) <= expected.keys()
            assert (mode is not None) == (set(CONSUMER_ANOMALIES) <= expected.keys())


def test_negative_controls_expect_anomalies() -> None:
    assert find_scenario("no-idempotence").expected.for_run("kafka")["duplicate"] == ">0"
    assert find_scenario("inflight-6").expected.for_run("refbroker")["duplicate"] == ">0"
    assert find_scenario("acks-1").producer_config["acks"] == 1
    auto_commit = find_scenario("auto-commit-crash")
    assert auto_commit.run_modes == ["auto-commit"]
    assert auto_commit.expected.for_run("kafka", "auto-commit")["unprocessed"] == ">0"


def test_the_consumer_crash_is_a_negative_control_in_commit_after_only() -> None:
    crash = find_scenario("consumer-crash-before-commit")
    assert crash.run_modes == ["commit-after", "idempotent", "dedup-table"]
    duplicates = {m: crash.expected.for_run("kafka", m)["effect_duplicate"] for m in crash.modes}
    assert duplicates == {"commit-after": ">0", "idempotent": "0", "dedup-table": "0"}
    assert all(crash.expected.for_run("kafka", m)["redelivered"] == ">0" for m in crash.modes)


def test_the_stale_skip_is_a_negative_control_of_the_idempotent_handler_only() -> None:
    stale = find_scenario("idempotent-stale-skip")
    assert stale.run_modes == ["idempotent", "dedup-table", "commit-after"]
    assert stale.producer_config["enable.idempotence"] is False
    for target in stale.targets:
        expected = {m: stale.expected.for_run(target, m) for m in stale.modes}
        assert {m: e["effect_lost"] for m, e in expected.items()} == {
            "idempotent": ">0",
            "dedup-table": "0",
            "commit-after": "0",
        }
        assert {m: e["effect_reorder"] for m, e in expected.items()} == {
            "idempotent": "0",
            "dedup-table": ">0",
            "commit-after": ">0",
        }
        assert all(e["key_reorder"] == ">0" for e in expected.values())


def test_a_producer_scenario_runs_with_the_default_consumers_in_a_mode() -> None:
    baseline = find_scenario("baseline")
    assert baseline.run_modes == [None]
    assert baseline.consumer_workload(None) is None
    paired = baseline.consumer_workload("dedup-table")
    assert paired is not None
    assert paired.mode == "dedup-table"
    assert baseline.expected.for_run("kafka", "dedup-table")["effect_duplicate"] == "0"
    assert "effect_duplicate" not in baseline.expected.for_run("kafka")


VALID: dict[str, Any] = {
    "name": "broken",
    "description": "a test scenario",
    "targets": ["kafka"],
    "workload": {"records": 100},
    "nemesis": [{"kind": "kill", "at": 1, "target": "leader", "duration": 2}],
}


def write(tmp_path: Path, **changes: Any) -> Path:
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(VALID | changes))
    return path


def refusal(path: Path) -> str:
    with pytest.raises(ScenarioError) as refused:
        load_scenario(path)
    return str(refused.value)


def test_a_valid_file_loads(tmp_path: Path) -> None:
    assert load_scenario(write(tmp_path)).nemesis[0].kind == "kill"


@pytest.mark.parametrize(
    ("changes", "field", "reason"),
    [
        (
            {"nemesis": [{"kind": "explode", "at": 1}]},
            "nemesis.0.kind",
            "unknown step kind 'explode'",
        ),
        (
            {"nemesis": [{"kind": "proxy", "at": 1, "fault": {"kind": "teleport"}}]},
            "nemesis.0.fault",
            "unknown fault kind 'teleport'",
        ),
        ({"nemesis": [{"kind": "kill", "at": -1}]}, "nemesis.0.at", "greater than or equal to 0"),
        (
            {"nemesis": [{"kind": "pause", "at": 5, "until": 3}]},
            "nemesis.0",
            "ends (3.0) before it starts (5.0)",
        ),
        (
            {"nemesis": [{"kind": "pause", "at": 5}]},
            "nemesis.0",
            "a pause needs a duration",
        ),
        (
            {"nemesis": [{"kind": "kill", "at": 1, "after_acked": 10}]},
            "nemesis.0",
            "either at or after_acked",
        ),
        ({"targets": ["kafka", "mongodb"]}, "targets.1", "'kafka', 'kafka4' or 'refbroker'"),
        (
            {"nemesis": [{"kind": "kill", "at": 1, "target": "kafka-9"}]},
            "nemesis.0.target",
            "'leader'",
        ),
        (
            {"producer": {"linger.mss": 5}},
            "producer",
            'No such configuration property: "linger.mss"',
        ),
        ({"producer": {"acks": "most"}}, "producer", "Invalid value"),
        ({"producer": {"bootstrap.servers": "x:1"}}, "producer", "set by the run"),
        (
            {"expected": {"anomalies": {"duplicate": "lots"}}},
            "expected.anomalies.duplicate",
            '\'lots\' is not an expectation: "N" (exactly N), ">N"',
        ),
        (
            {"expected": {"anomalies": {"teleported": "0"}}},
            "expected.anomalies.teleported",
            "unknown name; known names: lost, duplicate, reorder, gap, phantom",
        ),
        (
            {"expected": {"on": {"kafak": {}}}},
            "expected.on.kafak",
            "unknown name; known names: kafka, kafka4, refbroker",
        ),
        (
            {"expected": {"errors": {"NOT_AN_ERROR": ">0"}}},
            "expected.errors",
            "unknown Kafka error",
        ),
        ({"colour": "red"}, "colour", "Extra inputs are not permitted"),
        (
            {"nemesis": [{"kind": "producer-crash", "at": 1, "producer": 3}]},
            "nemesis.0.producer",
            "the workload has 1 producer",
        ),
        (
            {"nemesis": [{"kind": "producer-zombie", "at": 1, "duration": 2}]},
            "nemesis.0.kind",
            "producer-zombie needs transactional producers (workload.transactions)",
        ),
        (
            {"nemesis": [{"kind": "refbroker", "at": 1, "fault": {"kind": "crash-restart"}}]},
            "nemesis.0",
            "needs on: [refbroker]",
        ),
        ({"workload": {"records": None}}, "workload", "give a record count"),
        (
            {"workload": {"records": 100, "copy": {"workers": 2}}},
            "workload",
            "copy: the copier checks its input against the transaction ledger; it needs "
            "transactional producers",
        ),
        (
            {"workload": {"records": 100, "transactions": {}, "copy": {"workers": 0}}},
            "workload.copy.workers",
            "greater than or equal to 1",
        ),
        (
            {
                "workload": {
                    "records": 100,
                    "transactions": {},
                    "copy": {"workers": 2, "crash_after_batches": {2: 1}},
                }
            },
            "workload.copy",
            "crash_after_batches: worker 2, but the copier has 2 worker(s)",
        ),
        (
            {"workload": {"records": 100, "transactions": {}, "copy": {"transactonal": False}}},
            "workload.copy.transactonal",
            "Extra inputs are not permitted",
        ),
        (
            {"nemesis": [{"kind": "restart", "after_acked": 500, "target": "kafka-1"}]},
            "nemesis.0.after_acked",
            "500 is more than the 100 records the run sends: the step could never fire",
        ),
        (
            {"timeout_s": 10, "nemesis": [{"kind": "restart", "at": 30, "target": "kafka-1"}]},
            "nemesis.0.at",
            "past the run's timeout_s (10 s)",
        ),
        (
            {
                "workload": {"records": 100, "rate": 50},
                "nemesis": [{"kind": "restart", "at": 1.5, "jitter": 1, "target": "kafka-1"}],
            },
            "nemesis.0.at",
            "past the 2 s the producers send",
        ),
        ({"refbroker": {"rules": "kafka-2.0"}}, "refbroker", "needs target refbroker"),
        ({"clients": ["1.0.0"]}, "clients", "librdkafka:1.0.0: not a librdkafka release the lab"),
        ({"clients": ["cobol:1"]}, "clients", "unknown client library 'cobol'"),
        ({"broker_config": {"refbroker": {"x": 1}}}, "broker_config", "are not Kafka targets"),
        (
            {"expected": {"fatal": {"NOT_AN_ERROR": ">0"}}},
            "expected.fatal",
            "unknown Kafka error",
        ),
        (
            {"consumers": {"mode": "dedup-table", "group_protocol": "consumer"}},
            "",
            "consumer (KIP-848) is Kafka 4's; not on ['kafka']",
        ),
        (
            {
                "targets": ["kafka4"],
                "consumers": {
                    "mode": "dedup-table",
                    "group_protocol": "consumer",
                    "config": {"session.timeout.ms": 10000},
                },
            },
            "consumers",
            "session.timeout.ms belong to the classic protocol",
        ),
    ],
)
def test_a_bad_file_is_refused_with_file_field_and_reason(
    tmp_path: Path, changes: dict[str, Any], field: str, reason: str
) -> None:
    message = refusal(write(tmp_path, **changes))
    assert message.startswith(f"{tmp_path / 'broken.yaml'}: {field}")
    assert reason in message


def test_a_run_whose_record_count_puts_a_trigger_out_of_reach_is_refused_before_it_starts() -> None:
    producer_restart = find_scenario("producer-restart")
    with pytest.raises(RunError, match=r"nemesis\.0\.after_acked: 1000 is more than the 500"):
        plan(producer_restart, "kafka", records=500)
    assert plan(producer_restart, "kafka", records=1500).workload.records == 1500
    with pytest.raises(RunError, match="records: 0 is not a positive record count"):
        plan(producer_restart, "kafka", records=0)
    with pytest.raises(RunError, match="unknown client library 'cobol'"):
        plan(producer_restart, "kafka", client="cobol:1")
    assert plan(producer_restart, "kafka", client="java:3.9.2").client == "java:3.9.2"
    assert plan(producer_restart, "kafka", client="librdkafka:2.2.0").client == "librdkafka:2.2.0"
    assert plan(find_scenario("librdkafka-3584"), "refbroker", client="2.2.0").client == (
        "librdkafka:2.2.0"
    )


def test_an_external_cluster_is_judged_as_kafka_or_as_the_user_asks() -> None:
    lost_acks = find_scenario("lost-acks")
    external = {"bootstrap": "127.0.0.1:1"}  # plan never connects
    assert plan(lost_acks, "external", **external).lab_target == "kafka"
    as_kafka4 = plan(lost_acks, "external", expect_as="kafka4", **external)
    assert (as_kafka4.target, as_kafka4.lab_target) == ("external", "kafka4")
    with pytest.raises(RunError, match=r"^--expect-as 'refbroker': .* kafka or kafka4"):
        plan(lost_acks, "external", expect_as="refbroker", **external)
    with pytest.raises(RunError, match="kafka-14417 is not meant for kafka4"):
        plan(find_scenario("kafka-14417"), "external", expect_as="kafka4", **external)
    with pytest.raises(RunError, match="--expect-as goes with --target external"):
        plan(lost_acks, "kafka4", expect_as="kafka4")


def test_an_unknown_anomaly_is_one_line_naming_file_field_and_known_names(
    tmp_path: Path,
) -> None:
    """Not pydantic's union internals (``[key]``, ``literal[...]``, one line per alternative):
    one line, with the producer's and the consumer's anomalies both among the known names."""
    path = write(tmp_path, expected={"anomalies": {"lostt": "0"}})
    done = subprocess.run(
        [sys.executable, "-m", "eoslab.cli", "scenarios", "show", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: {path}: expected.anomalies.lostt: unknown name; known names:")
    assert all(name in line for name in (*PRODUCER_ANOMALIES, *CONSUMER_ANOMALIES))
    assert "[key]" not in line
    assert "literal" not in line


UNQUOTED_ON = """\
name: on-unquoted
description: on written as the README writes it
targets: [kafka, refbroker]
producer: {enable.idempotence: on}
nemesis:
  - kind: refbroker
    at: 1
    on: [refbroker]
    fault: {kind: crash-restart}
expected:
  anomalies: {duplicate: ">=0"}
  on:
    kafka: {anomalies: {duplicate: ">0"}}
    refbroker: {errors: {OUT_OF_ORDER_SEQUENCE_NUMBER: ">0"}}
"""


def test_on_unquoted_is_the_key_on(tmp_path: Path) -> None:
    """YAML 1.1 reads a plain ``on`` as True; a scenario file reads it as the key it is, for a
    step's targets and for the per-target expectations alike (values keep YAML 1.1's words)."""
    path = tmp_path / "on.yaml"
    path.write_text(UNQUOTED_ON)
    scenario = load_scenario(path)
    assert scenario.nemesis[0].on == ("refbroker",)
    assert scenario.expected.for_run("kafka")["duplicate"] == ">0"
    assert scenario.expected.for_run("refbroker")["errors"] == {
        "OUT_OF_ORDER_SEQUENCE_NUMBER": ">0"
    }
    assert scenario.producer["enable.idempotence"] is True


def test_yaml_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- just\n- a list\n")
    assert "a scenario is a mapping" in refusal(path)


def test_an_unknown_catalogue_name_lists_the_known_ones() -> None:
    with pytest.raises(ScenarioError, match="baseline"):
        find_scenario("no-such-scenario")


def test_the_commands_list_and_show_the_catalogue() -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["list"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0
    for name in CATALOGUE:
        assert name in listed.output
    shown = runner.invoke(app, ["show", "leader-kill", "--target", "kafka"])
    assert shown.exit_code == 0
    assert "name: leader-kill" in shown.output
    assert "step 0: kill leader at 2.0 s for 6.0 s" in shown.output
    missing = runner.invoke(app, ["show", "nope"])
    assert missing.exit_code == 1


@pytest.mark.parametrize("listing", [("scenarios", "list"), ("probe", "list")])
def test_lists_never_cut_identifiers_and_speak_json(listing: tuple[str, str]) -> None:
    """Read by scripts: piped into a 40-column terminal, every identifier is whole; --json too."""

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "eoslab.cli", *listing, *args],
            env={**os.environ, "COLUMNS": "40"},
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        return done.stdout

    rows = json.loads(cli("--json"))
    names = [next(iter(row.values())) for row in rows]
    assert "consumer-crash-before-commit" in names or "group-rejoin-after-expiry" in names
    table = cli()
    assert all(name in table for name in names), [n for n in names if n not in table]


def test_the_list_reads_in_80_columns() -> None:
    """A summary, not a table of descriptions wrapped into ~680 lines: per scenario its name
    (whole, at the start of a line), where it runs, its faults and what each cell expects to
    see; the descriptions are in `eoslab scenarios show NAME` (and --json, unchanged)."""
    done = subprocess.run(
        [sys.executable, "-m", "eoslab.cli", "scenarios", "list"],
        env={**os.environ, "COLUMNS": "80"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    lines = done.stdout.splitlines()
    assert len(lines) <= 3 * len(CATALOGUE) + 2, len(lines)
    assert all(len(line) <= 80 for line in lines)
    starts = {line.split()[0] for line in lines if line.strip()}
    assert set(CATALOGUE) <= starts
    text = " ".join(done.stdout.split())
    assert "scenarios show NAME" in text
    assert (
        "consumer-crash-before-commit kafka, kafka4, refbroker · modes: commit-after, idempotent, "
        "dedup-table · faults: consumer-crash expects >0: redelivered, effect_duplicate "
        "(commit-after); redelivered (idempotent, dedup-table)"
    ) in text
    assert "no-idempotence kafka, kafka4, refbroker · faults: proxy expects >0: duplicate" in text
    assert " ".join(find_scenario("auto-commit-crash").description.split())[:40] not in text


def test_consumer_scenarios_run_under_both_protocols_on_kafka4_only() -> None:
    zombie = find_scenario("zombie-consumer")
    assert zombie.group_protocols("kafka4") == ["classic", "consumer"]
    assert zombie.group_protocols("kafka") == ["classic"]
    assert zombie.group_protocols("refbroker") == ["classic"]
    assert find_scenario("baseline").group_protocols("kafka4") == ["classic"]


def test_the_consumer_protocol_leaves_the_session_to_the_broker() -> None:
    spec = find_scenario("zombie-consumer").consumer_workload(None)
    assert spec is not None
    assert spec.consumer_config["session.timeout.ms"] == 6000
    assert "group.protocol" not in spec.consumer_config  # classic: librdkafka's default
    kip848 = spec.model_copy(update={"group_protocol": "consumer"}).consumer_config
    assert kip848["group.protocol"] == "consumer"
    assert not {"session.timeout.ms", "heartbeat.interval.ms"} & set(kip848)
    assert kip848["auto.offset.reset"] == "earliest"


@pytest.mark.parametrize("target", ["kafka", "refbroker"])
def test_a_run_refuses_the_consumer_protocol_where_no_broker_speaks_it(
    tmp_path: Path, target: str
) -> None:
    """Refused before anything is created: no run directory, no topic."""
    nowhere = LabConfig(state_dir=tmp_path / "lab", port_offset=9999, with_airflow=False)
    with pytest.raises(RunError, match="needs Kafka 4: target kafka4"):
        execute(
            find_scenario("zombie-consumer"),
            target,
            runtime=LocalRuntime(nowhere),
            config=nowhere,
            runs_root=tmp_path / "runs",
            group_protocol="consumer",
        )
    with pytest.raises(RunError, match="goes with consumers"):
        execute(
            find_scenario("baseline"),
            "kafka4",
            runtime=LocalRuntime(nowhere),
            config=nowhere,
            runs_root=tmp_path / "runs",
            group_protocol="consumer",
        )
    assert not (tmp_path / "runs").exists()


def test_a_producer_cell_may_name_the_classic_protocol_it_never_uses() -> None:
    """What every matrix cell of a producer scenario passes (Cell.group_protocol)."""
    assert plan(find_scenario("baseline"), "kafka", group_protocol="classic").consumers is None
    with pytest.raises(RunError, match="goes with consumers"):
        plan(find_scenario("baseline"), "kafka4", group_protocol="consumer")


TXN_COORDINATOR_WITHOUT_TRANSACTIONS = """\
name: txn-coordinator-idempotent
description: the transaction coordinator of producers that have no transactional id
targets: [kafka]
nemesis:
  - kind: kill
    at: 1
    target: txn-coordinator
"""


def test_the_txn_coordinator_target_needs_transactional_producers(tmp_path: Path) -> None:
    path = tmp_path / "txn.yaml"
    path.write_text(TXN_COORDINATOR_WITHOUT_TRANSACTIONS)
    with pytest.raises(ScenarioError, match="txn-coordinator needs transactional producers"):
        load_scenario(path)
    path.write_text(
        TXN_COORDINATOR_WITHOUT_TRANSACTIONS + "workload: {transactions: {abort_ratio: 0.5}}\n"
    )
    scenario = load_scenario(path)
    assert scenario.workload.transactions is not None
    assert scenario.expected.for_run("kafka", transactional=True)["aborted_read"] == "0"
    assert "aborted_read" not in scenario.expected.for_run("kafka")


def test_the_copy_scenarios_expect_exactly_once_and_its_negative_control() -> None:
    kill = find_scenario("txn-copy-coordinator-kill")
    assert kill.workload.copy_stage is not None
    assert kill.workload.copy_stage.transactional
    expected = kill.expected.for_run("refbroker", transactional=True, copied=True)
    assert {n: expected[n] for n in COPY_ANOMALIES} == dict.fromkeys(COPY_ANOMALIES, "0")
    assert "lost_copy" not in kill.expected.for_run("refbroker", transactional=True)
    control = find_scenario("txn-copy-at-least-once")
    assert control.workload.copy_stage is not None
    assert not control.workload.copy_stage.transactional
    assert control.workload.copy_stage.crash_after_batches == {0: 3}
    assert control.expected.for_run("kafka", copied=True)["duplicate_copy"] == ">0"
