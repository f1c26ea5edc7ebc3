"""The transaction scenarios of test_txn_clients.py on both of the lab's targets: Kafka 3.9
(three brokers, RF 3, behind the proxy) and the reference broker (behind the proxy too). The
same assertions hold on both."""

from __future__ import annotations

from pathlib import Path

import pytest
from group_scenarios import GroupTarget
from txn_scenarios import (
    commit_and_abort,
    consume_transform_produce,
    hanging_transaction_aborted,
    java_transactional_copy,
    zombie_fenced,
)

from eoslab.runtime.local import LocalRuntime
from eoslab.scenarios.executor import REPLICATION, bootstrap_of

pytestmark = pytest.mark.lab


@pytest.fixture(params=["kafka", "refbroker"])
def target(lab: LocalRuntime, request: pytest.FixtureRequest) -> GroupTarget:
    name = str(request.param)
    return GroupTarget(name, bootstrap_of(name, lab.config), REPLICATION.get(name, 1))


def test_librdkafka_commits_and_aborts(target: GroupTarget) -> None:
    commit_and_abort(target, f"lab-txn-{target.name}", f"lab-tx-{target.name}")


def test_librdkafka_consume_transform_produce(target: GroupTarget) -> None:
    name = target.name
    consume_transform_produce(
        target, f"lab-ctp-in-{name}", f"lab-ctp-out-{name}", f"lab-ctp-{name}", f"lab-ctp-{name}"
    )


def test_a_zombie_producer_is_fenced(target: GroupTarget) -> None:
    zombie_fenced(target, f"lab-zombie-{target.name}", f"lab-zombie-{target.name}")


def test_a_hanging_transaction_is_aborted(target: GroupTarget) -> None:
    hanging_transaction_aborted(target, f"lab-hanging-{target.name}", f"lab-hanging-{target.name}")


def test_the_java_client_copies_transactionally(target: GroupTarget, tmp_path: Path) -> None:
    name = target.name
    java_transactional_copy(
        target, f"lab-java-in-{name}", f"lab-java-out-{name}", tmp_path, f"lab-java-{name}"
    )
