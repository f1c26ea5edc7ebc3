"""Real group consumers on a private reference broker: librdkafka and Kafka's Java client split
partitions, hand them over, and resume from committed offsets, across a consumer restart, the
crash-restart fault and kill -9 (the broker runs --fsync every-batch, its default); aiokafka,
kcat -G and franz-go consume in groups and resume too."""

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
    librdkafka_members_survive_a_coordinator_restart,
    librdkafka_offsets_resume,
    librdkafka_static_member_restarts_without_rebalance,
)
from refbroker_process import FAST_JOIN, RunningBroker, StartBroker


@pytest.fixture
def broker(start_refbroker: StartBroker) -> RunningBroker:
    return start_refbroker(*FAST_JOIN)


def target_of(broker: RunningBroker) -> GroupTarget:
    return GroupTarget("refbroker", broker.bootstrap)


def test_librdkafka_members_split_partitions_and_hand_them_over(broker: RunningBroker) -> None:
    librdkafka_members_split_and_hand_over(target_of(broker), "split", "g-split")
    groups = broker.counters()["groups"]
    assert groups["rebalances"] >= 2  # both joined (one or two generations), b left
    assert groups["offsets_committed"] >= 4


def test_librdkafka_cooperative_sticky_members_split_and_hand_over(
    broker: RunningBroker,
) -> None:
    cooperative = {"partition.assignment.strategy": "cooperative-sticky"}
    librdkafka_members_split_and_hand_over(target_of(broker), "coop", "g-coop", **cooperative)


def test_librdkafka_static_members(broker: RunningBroker) -> None:
    librdkafka_static_member_restarts_without_rebalance(target_of(broker), "static", "g-static")


def test_a_stable_group_survives_the_crash_restart_fault(broker: RunningBroker) -> None:
    """The group's generation and assignment are on disk: after crash-restart the members'
    heartbeats are accepted and nobody rebalances."""
    rebalances_before: list[int] = []

    def crash() -> None:
        rebalances_before.append(broker.counters()["groups"]["rebalances"])
        assert broker.fault(kind="crash-restart")["connections_dropped"] >= 2

    librdkafka_members_survive_a_coordinator_restart(
        target_of(broker), "survive", "g-survive", crash
    )
    assert [broker.counters()["groups"]["rebalances"]] == rebalances_before


def test_committed_offsets_resume_after_a_consumer_restart(broker: RunningBroker) -> None:
    librdkafka_offsets_resume(target_of(broker), "resume", "g-resume", between=lambda: None)


def test_committed_offsets_survive_the_crash_restart_fault(broker: RunningBroker) -> None:
    def crash() -> None:
        assert broker.fault(kind="crash-restart")["kind"] == "crash-restart"

    librdkafka_offsets_resume(target_of(broker), "crash", "g-crash", between=crash)


def test_committed_offsets_survive_kill_9(broker: RunningBroker) -> None:
    def kill_and_restart() -> None:
        broker.kill()
        broker.start()

    librdkafka_offsets_resume(target_of(broker), "kill", "g-kill", between=kill_and_restart)


def test_kafkas_java_verifiable_consumer_in_a_group(broker: RunningBroker, tmp_path: Path) -> None:
    java_members_split_hand_over_and_resume(target_of(broker), "java", "g-java", tmp_path)


def test_kafkas_java_verifiable_consumer_with_the_cooperative_sticky_assignor(
    broker: RunningBroker, tmp_path: Path
) -> None:
    java_members_split_hand_over_and_resume(
        target_of(broker), "java-coop", "g-java-coop", tmp_path, assignor=COOPERATIVE_STICKY
    )


def test_aiokafka_members_split_and_resume(broker: RunningBroker) -> None:
    aiokafka_members_split_and_resume(target_of(broker), "aio", "g-aio")


def test_kcat_balanced_consumer_reads_and_resumes(broker: RunningBroker) -> None:
    def consume(count: int) -> list[tuple[int, int]]:
        return kcat_consume(broker.bootstrap, "g-kcat", "kcat", count)

    cli_consumer_resumes(target_of(broker), "kcat", "g-kcat", consume)


def test_franz_go_group_consumer_reads_and_resumes(
    broker: RunningBroker, franzgo_binary: Path
) -> None:
    def consume(count: int) -> list[tuple[int, int]]:
        return franzgo_consume(franzgo_binary, broker.bootstrap, "g-franz", "franz", count)

    committed = cli_consumer_resumes(target_of(broker), "franz", "g-franz", consume)
    assert committed == dict.fromkeys(range(4), 100)  # it commits all it read, then leaves


def test_franz_go_1_21_joins_its_group(broker: RunningBroker, franzgo_1_21_binary: Path) -> None:
    """Issue 19: franz-go 1.21.0 answers its own OffsetFetch with UNKNOWN_TOPIC_OR_PARTITION
    when the topic's Metadata carries no topic id (it takes the zero id for an unknown topic),
    and never joins; Kafka 3.9 gives every topic an id, and so does the reference broker."""

    def consume(count: int) -> list[tuple[int, int]]:
        return franzgo_consume(
            franzgo_1_21_binary, broker.bootstrap, "g-franz121", "franz121", count
        )

    committed = cli_consumer_resumes(target_of(broker), "franz121", "g-franz121", consume)
    assert committed == dict.fromkeys(range(4), 100)
