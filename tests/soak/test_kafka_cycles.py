"""The soak's leader kill cycles on a real cluster: one cycle on the session lab's Kafka 4 (the
full soak runs twenty on each cluster, each in a lab of its own)."""

from __future__ import annotations

import pytest

from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.topology import KAFKA4_SERVICES
from eoslab.soak.kafka_cycles import KafkaCycleParams, leader_kill_cycles
from eoslab.soak.verdict import kafka_cycle_problems

pytestmark = [pytest.mark.lab, pytest.mark.kafka4]


def test_a_leader_kill_cycle_on_kafka4_loses_nothing_and_the_cluster_heals(
    lab: LocalRuntime,
) -> None:
    figures = leader_kill_cycles(lab, "kafka4", KafkaCycleParams(cycles=1, acks_per_cycle=100))
    assert figures["cycles"] == 1
    assert figures["leadership_moved"] == 1  # the kill took effect: another broker leads
    (killed,) = figures["leaders_killed"]
    assert killed in (1, 2, 3)
    witness = figures["witness"]
    assert witness["acknowledged"] > 100
    assert (witness["lost"], witness["duplicates_within_session"]) == (0, 0)
    group = figures["consumer_group"]
    assert group["acknowledged_commits"] > 0
    assert group["committed_offset_at_end"] >= group["highest_commit"]
    assert kafka_cycle_problems("kafka4", figures) == []
    assert lab.wait_healthy(KAFKA4_SERVICES, 60)
