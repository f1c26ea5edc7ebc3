"""The group scenarios of test_group_clients.py on both of the lab's targets: Kafka 3.9 (three
brokers, RF 3, behind the proxy) and the reference broker (behind the proxy too). The same
assertions hold on both."""

from __future__ import annotations

from pathlib import Path

import pytest
from group_clients import franzgo_consume, kcat_consume
from group_scenarios import (
    COOPERATIVE_STICKY,
    GroupTarget,
    aiokafka_members_split_and_resume,
    cli_consumer_resumes,
    java_members_split_hand_over_and_resume,
    librdkafka_members_split_and_hand_over,
    librdkafka_offsets_resume,
    librdkafka_static_member_restarts_without_rebalance,
)

from eoslab.runtime.local import LocalRuntime
from eoslab.scenarios.executor import REPLICATION, bootstrap_of

pytestmark = pytest.mark.lab


@pytest.fixture(params=["kafka", "refbroker"])
def target(lab: LocalRuntime, request: pytest.FixtureRequest) -> GroupTarget:
    name = str(request.param)
    return GroupTarget(name, bootstrap_of(name, lab.config), REPLICATION.get(name, 1))


def test_librdkafka_members_split_and_hand_over(target: GroupTarget) -> None:
    librdkafka_members_split_and_hand_over(target, f"lab-split-{target.name}", "lab-split")


def test_librdkafka_cooperative_sticky_members(target: GroupTarget) -> None:
    cooperative = {"partition.assignment.strategy": "cooperative-sticky"}
    librdkafka_members_split_and_hand_over(
        target, f"lab-coop-{target.name}", "lab-coop", **cooperative
    )


def test_librdkafka_static_members(target: GroupTarget) -> None:
    librdkafka_static_member_restarts_without_rebalance(
        target, f"lab-static-{target.name}", "lab-static"
    )


def test_librdkafka_offsets_resume_after_a_consumer_restart(target: GroupTarget) -> None:
    librdkafka_offsets_resume(target, f"lab-resume-{target.name}", "lab-resume", lambda: None)


def test_java_verifiable_consumers(target: GroupTarget, tmp_path: Path) -> None:
    java_members_split_hand_over_and_resume(target, f"lab-java-{target.name}", "lab-java", tmp_path)


def test_java_cooperative_sticky(target: GroupTarget, tmp_path: Path) -> None:
    topic = f"lab-java-coop-{target.name}"
    java_members_split_hand_over_and_resume(
        target, topic, "lab-java-coop", tmp_path, assignor=COOPERATIVE_STICKY
    )


def test_aiokafka_members(target: GroupTarget) -> None:
    aiokafka_members_split_and_resume(target, f"lab-aio-{target.name}", "lab-aio")


def test_kcat_and_franz_go(target: GroupTarget, franzgo_binary: Path) -> None:
    kcat_topic, franz_topic = f"lab-kcat-{target.name}", f"lab-franz-{target.name}"
    cli_consumer_resumes(
        target,
        kcat_topic,
        "lab-kcat",
        lambda count: kcat_consume(target.bootstrap, "lab-kcat", kcat_topic, count),
    )
    cli_consumer_resumes(
        target,
        franz_topic,
        "lab-franz",
        lambda count: franzgo_consume(
            franzgo_binary, target.bootstrap, "lab-franz", franz_topic, count
        ),
    )


def test_franz_go_1_21(target: GroupTarget, franzgo_1_21_binary: Path) -> None:
    """Issue 19's client: it needs topic ids in Metadata, which both targets give."""
    topic = f"lab-franz121-{target.name}"
    cli_consumer_resumes(
        target,
        topic,
        "lab-franz121",
        lambda count: franzgo_consume(
            franzgo_1_21_binary, target.bootstrap, "lab-franz121", topic, count
        ),
    )
