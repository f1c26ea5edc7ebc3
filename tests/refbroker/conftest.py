"""Fixtures: the reference broker as a real subprocess (see refbroker_process.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from group_clients import FRANZGO_1_21, build_franzgo
from refbroker_process import FAST_JOIN, RunningBroker, StartBroker

from eoslab.probe.client import KafkaProtocolClient


@pytest.fixture
def start_refbroker(tmp_path: Path) -> Iterator[StartBroker]:
    """Factory: start_refbroker("--rules", "kafka-2.0") -> a running broker, stopped at teardown."""
    started: list[RunningBroker] = []

    def start(*extra_args: str) -> RunningBroker:
        broker = RunningBroker(tmp_path / f"refbroker{len(started)}", extra_args)
        started.append(broker)
        broker.start()
        return broker

    try:
        yield start
    finally:
        for broker in started:
            if broker.process is not None:
                broker.stop()


@pytest.fixture
def refbroker(start_refbroker: StartBroker) -> RunningBroker:
    return start_refbroker()


@pytest.fixture(scope="session")
def franzgo_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The franz-go group consumer (tests/refbroker/franzgo), built once per session."""
    return build_franzgo(tmp_path_factory.mktemp("franzgo"))


@pytest.fixture(scope="session")
def franzgo_1_21_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same consumer built against franz-go 1.21.0 (issue 19's version)."""
    return build_franzgo(tmp_path_factory.mktemp("franzgo"), FRANZGO_1_21)


@pytest.fixture
def group_broker(start_refbroker: StartBroker) -> RunningBroker:
    """For the group tests: groups form at once (FAST_JOIN), topic "t" has 2 partitions."""
    started = start_refbroker(*FAST_JOIN)
    started.create_topic("t", 2)
    return started


@pytest.fixture
def group_client(group_broker: RunningBroker) -> Iterator[KafkaProtocolClient]:
    with group_broker.client() as connected:
        yield connected
