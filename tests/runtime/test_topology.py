"""The lab's topology for the targets it runs (pure: no process is started)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eoslab.runtime.topology import (
    LabConfig,
    broker_service,
    brokers_of,
    parse_targets,
    recorded_targets,
)
from eoslab.settings import TARGETS


def names(config: LabConfig) -> list[str]:
    return [s.name for s in config.services()]


def test_a_lab_runs_the_services_of_its_targets(tmp_path: Path) -> None:
    bare = {"state_dir": tmp_path, "port_offset": 0, "with_postgres": False}
    off = {**bare, "with_spark_connect": False, "with_airflow": False}
    assert names(LabConfig(targets=("kafka4",), **off)) == [
        "kafka4-1",
        "kafka4-2",
        "kafka4-3",
        "proxy",
    ]
    assert names(LabConfig(targets=("refbroker",), **off)) == ["zookeeper", "refbroker", "proxy"]
    assert names(LabConfig(targets=("kafka", "kafka4", "refbroker"), **off)) == [
        "zookeeper",
        *(f"kafka-{i}" for i in (1, 2, 3)),
        *(f"kafka4-{i}" for i in (1, 2, 3)),
        "refbroker",
        "proxy",
    ]
    assert names(LabConfig(targets=(), with_zookeeper=True, **off)) == ["zookeeper"]


def test_kafka4_ports_routes_and_quorum(tmp_path: Path) -> None:
    config = LabConfig(state_dir=tmp_path, port_offset=1000, targets=("kafka4",))
    node = config.service("kafka4-2")
    assert node.ports == {
        "client": 30292,
        "internal": 20292,
        "controller": 20392,
        "advertised": 10292,
    }
    assert config.kafka4_bootstrap == "127.0.0.1:10291,127.0.0.1:10292,127.0.0.1:10293"
    assert config.bootstrap("kafka4") == config.kafka4_bootstrap
    assert config.kafka4_quorum_voters == ("1@127.0.0.1:20391,2@127.0.0.1:20392,3@127.0.0.1:20393")
    assert ("kafka4-2", 10292, 30292) in config.proxy_routes()


def test_brokers_of_each_target() -> None:
    assert brokers_of("kafka4") == ("kafka4-1", "kafka4-2", "kafka4-3")
    assert broker_service("kafka4", 2) == "kafka4-2"
    assert broker_service("kafka", 2) == "kafka-2"
    assert broker_service("refbroker", 3) == "refbroker"


def test_targets_come_from_the_environment_else_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TARGETS, raising=False)
    assert LabConfig(state_dir=tmp_path).targets == ("kafka", "kafka4", "refbroker")
    monkeypatch.setenv(TARGETS, "refbroker, kafka4")
    assert LabConfig(state_dir=tmp_path).targets == ("kafka4", "refbroker")
    monkeypatch.setenv(TARGETS, "kafka,redpanda")
    with pytest.raises(ValueError, match="unknown target 'redpanda'; choose one of"):
        LabConfig(state_dir=tmp_path)
    with pytest.raises(ValueError, match="no target given"):
        parse_targets([])


def test_a_running_labs_targets_are_read_from_its_state_file(tmp_path: Path) -> None:
    assert recorded_targets(tmp_path) is None
    (tmp_path / "state.json").write_text(json.dumps({"targets": ["refbroker"], "services": {}}))
    assert recorded_targets(tmp_path) == ("refbroker",)
    (tmp_path / "state.json").write_text("{not json")
    assert recorded_targets(tmp_path) is None
