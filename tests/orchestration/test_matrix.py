"""The matrix a DAG run plans: scenarios x targets x handler modes (pure logic)."""

from __future__ import annotations

import pytest

from eoslab.orchestration.matrix import (
    CONSUMER_CLIENTS,
    DEFAULT_RECORDS,
    END_TO_END,
    FRANZ_GO,
    JAVA,
    MATRIX_CLIENTS,
    SAMPLE_STRIDE,
    Cell,
    MatrixError,
    plan,
)
from eoslab.rundir import LAB_TARGETS
from eoslab.scenarios.catalogue import catalogue, load_scenario


def test_the_default_matrix_covers_both_halves_on_every_target_with_their_negative_controls() -> (
    None
):
    cells = plan({"matrix": "default"})
    assert len(cells) <= 9  # make lab stays quick
    assert {c.target for c in cells} == set(LAB_TARGETS)
    for target in LAB_TARGETS:
        halves = {c.mode is None for c in cells if c.target == target}
        assert halves == {True, False}, target
    assert ("no-idempotence", None) in {(c.scenario, c.mode) for c in cells}
    assert ("consumer-crash-before-commit", "commit-after") in {(c.scenario, c.mode) for c in cells}
    assert {c.records for c in cells} == {DEFAULT_RECORDS}
    assert ("lost-acks", "kafka4", JAVA) in {(c.scenario, c.target, c.client) for c in cells}
    assert FRANZ_GO in {c.client for c in cells}
    narrowed = plan({"matrix": "default", "targets": ["refbroker"]})
    assert narrowed == [c for c in cells if c.target == "refbroker"]
    java_only = plan({"matrix": "default", "clients": ["java"]})
    assert java_only == [c for c in cells if c.client == JAVA]
    own_only = plan({"matrix": "default", "clients": ["librdkafka"]})
    assert own_only == [c for c in cells if c.client is None]


def test_the_full_matrix_runs_every_consumer_scenario_in_each_of_its_modes() -> None:
    cells = plan({"matrix": "full"})
    crash = {(c.target, c.mode) for c in cells if c.scenario == "consumer-crash-before-commit"}
    assert crash == {
        (t, m)
        for t in ("kafka", "kafka4", "refbroker")
        for m in ("commit-after", "idempotent", "dedup-table")
    }
    for name, modes in END_TO_END.items():
        paired = {c.mode for c in cells if c.scenario == name}
        assert paired == {None, *modes}
    for name, path in catalogue().items():
        scenario = load_scenario(path)
        for target in scenario.targets:
            for mode in scenario.run_modes:
                assert Cell(name, target, None, mode) in cells
                for client in scenario.clients:
                    assert Cell(name, target, None, mode, client) in cells
                if not scenario.every_client:
                    continue
                for client in CONSUMER_CLIENTS if mode else MATRIX_CLIENTS:
                    assert Cell(name, target, None, mode, client) in cells
    consumer_clients = {c.client for c in cells if c.mode is not None}
    assert consumer_clients == {None, *CONSUMER_CLIENTS}
    assert not {c.client for c in cells if c.scenario == "inflight-6"} - {None}


def test_the_sample_matrix_keeps_every_targets_share_of_the_full_one() -> None:
    full, sample = plan({"matrix": "full"}), plan({"matrix": "sample"})
    assert set(sample) <= set(full)
    for target in LAB_TARGETS:
        on_target = [c for c in full if c.target == target]
        assert [c for c in sample if c.target == target] == on_target[::SAMPLE_STRIDE]
    assert len(sample) == sum(
        -(-len([c for c in full if c.target == t]) // SAMPLE_STRIDE) for t in LAB_TARGETS
    )
    assert {c.mode is None for c in sample} == {True, False}  # both halves
    assert {c.client for c in sample} >= {None, JAVA, FRANZ_GO}
    assert plan({"matrix": "sample", "targets": ["refbroker"]}) == [
        c for c in sample if c.target == "refbroker"
    ]


def test_a_request_names_the_clients_it_runs() -> None:
    cells = plan({"matrix": "full", "scenarios": ["lost-acks"], "clients": ["java:4.4.0"]})
    assert {c.client for c in cells} == {"java:4.4.0"}
    with pytest.raises(MatrixError, match="unknown client library 'cobol'"):
        plan({"matrix": "full", "clients": ["cobol:1"]})


def test_explicit_modes_pair_any_scenario_with_consumers() -> None:
    cells = plan({"scenarios": ["baseline", "zombie-consumer"], "modes": ["idempotent"]})
    assert {(c.scenario, c.mode) for c in cells} == {
        ("baseline", "idempotent"),
        ("zombie-consumer", "idempotent"),
    }


@pytest.mark.parametrize(
    ("request_", "problem"),
    [
        ({"matrix": "nightly"}, "unknown matrix"),
        ({"scenarios": ["nope"]}, "unknown scenario"),
        ({"targets": ["external"]}, "targets must be among"),
        ({"modes": ["exactly-once"]}, "modes must be among"),
    ],
)
def test_a_bad_request_names_what_is_wrong(request_: dict[str, object], problem: str) -> None:
    with pytest.raises(MatrixError, match=problem):
        plan(request_)
