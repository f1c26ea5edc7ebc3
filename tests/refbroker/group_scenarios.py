"""Consumer-group scenarios with real clients, written once and played on any target: a private
reference broker (test_group_clients.py) and the lab's Kafka and reference broker
(test_group_clients_lab.py).

Every topic has PARTITIONS partitions and gets PER_PARTITION records per round of production,
so offsets are predictable: round r covers offsets r*PER_PARTITION .. (r+1)*PER_PARTITION-1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError
from group_clients import (
    RdkafkaMember,
    Records,
    VerifiableConsumer,
    aiokafka_split_then_commit,
    poll_until,
    wait_until,
)

from eoslab.admin import create_topic
from eoslab.runtime.smoke import produce

PARTITIONS = 4
PER_PARTITION = 100
ALL = set(range(PARTITIONS))
RANGE = "org.apache.kafka.clients.consumer.RangeAssignor"
COOPERATIVE_STICKY = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"


@dataclass(frozen=True)
class GroupTarget:
    name: str
    bootstrap: str
    replication: int = 1

    def new_topic(self, topic: str) -> str:
        create_topic(self.bootstrap, topic, PARTITIONS, self.replication)
        return topic

    def produce_round(self, topic: str) -> None:
        produce(self.bootstrap, topic, PARTITIONS, PARTITIONS * PER_PARTITION)


def offsets_of_round(round_index: int) -> set[int]:
    return set(range(round_index * PER_PARTITION, (round_index + 1) * PER_PARTITION))


def whole_round(round_index: int) -> Records:
    """Every (partition, offset) of one round, sorted."""
    return [(p, o) for p in sorted(ALL) for o in sorted(offsets_of_round(round_index))]


def by_partition(records: list[tuple[int, int]]) -> dict[int, list[int]]:
    offsets: dict[int, list[int]] = {}
    for partition, offset in records:
        offsets.setdefault(partition, []).append(offset)
    return offsets


def split_between(first: set[int], second: set[int]) -> bool:
    return bool(first) and bool(second) and not first & second and first | second == ALL


def librdkafka_members_split_and_hand_over(
    target: GroupTarget, topic: str, group: str, **overrides: Any
) -> None:
    """Two subscribe() members share the partitions and read everything once; when one closes
    (LeaveGroup) the other takes its partitions from the committed offsets. `overrides`
    pick e.g. the cooperative-sticky assignor."""
    target.new_topic(topic)
    a = RdkafkaMember(target.bootstrap, group, topic, **overrides)
    b = RdkafkaMember(target.bootstrap, group, topic, **overrides)
    try:
        poll_until(
            [a, b],
            lambda: split_between(a.assigned(), b.assigned()),
            "two members split the partitions",
        )
        target.produce_round(topic)
        poll_until(
            [a, b],
            lambda: len(a.records) + len(b.records) == PARTITIONS * PER_PARTITION,
            "the two members read every record",
        )
        assert len(set(a.records) | set(b.records)) == PARTITIONS * PER_PARTITION
        handed_over = b.assigned()
        a.commit()
        b.commit()
        b.close()
        poll_until([a], lambda: a.assigned() == ALL, "the remaining member takes every partition")
        target.produce_round(topic)
        poll_until(
            [a],
            lambda: len(a.records) >= PARTITIONS * PER_PARTITION * 2 - len(b.records),
            "the remaining member reads the second round",
        )
        read = by_partition(a.records)
        for partition in handed_over:  # resumed at b's committed offset: nothing read twice
            assert sorted(read[partition]) == sorted(offsets_of_round(1)), partition
    finally:
        a.close()


def librdkafka_offsets_resume(
    target: GroupTarget, topic: str, group: str, between: Callable[[], None]
) -> None:
    """A member reads and commits round 0 and closes; `between` happens (nothing, a broker
    crash...); a new member of the group then reads exactly round 1."""
    target.new_topic(topic)
    target.produce_round(topic)
    first = RdkafkaMember(target.bootstrap, group, topic)
    try:
        poll_until(
            [first], lambda: len(first.records) == PARTITIONS * PER_PARTITION, "round 0 read"
        )
        first.commit()
        assert first.committed(ALL) == dict.fromkeys(ALL, PER_PARTITION)
    finally:
        first.close()
    between()
    target.produce_round(topic)
    second = RdkafkaMember(target.bootstrap, group, topic)
    try:
        poll_until(
            [second], lambda: len(second.records) >= PARTITIONS * PER_PARTITION, "round 1 read"
        )
        read = by_partition(second.records)
        assert {p: sorted(o) for p, o in read.items()} == {
            p: sorted(offsets_of_round(1)) for p in ALL
        }
    finally:
        second.close()


def java_members_split_hand_over_and_resume(
    target: GroupTarget, topic: str, group: str, log_dir: Path, assignor: str = RANGE
) -> None:
    """Kafka's VerifiableConsumer: two members split the partitions; one stops (LeaveGroup), the
    other takes over from the committed offsets; a new member after both resumes there too."""
    target.new_topic(topic)
    a = VerifiableConsumer(target.bootstrap, topic, group, log_dir, assignor=assignor)
    b = VerifiableConsumer(target.bootstrap, topic, group, log_dir, assignor=assignor)
    try:
        wait_until(
            lambda: split_between(a.assigned(), b.assigned()),
            "two Java members split the partitions",
            timeout_s=120,
        )
        target.produce_round(topic)
        wait_until(
            lambda: {**a.committed(), **b.committed()} == dict.fromkeys(ALL, PER_PARTITION),
            "the two Java members commit round 0",
        )
        handed_over = b.assigned()
        b.stop()
        wait_until(lambda: a.assigned() == ALL, "the remaining Java member takes every partition")
        target.produce_round(topic)
        wait_until(
            lambda: a.committed() == dict.fromkeys(ALL, 2 * PER_PARTITION),
            "the remaining Java member commits round 1",
        )
        for partition in handed_over:
            assert a.consumed()[partition] == offsets_of_round(1), partition
    finally:
        a.stop()
        b.stop()
    target.produce_round(topic)
    c = VerifiableConsumer(target.bootstrap, topic, group, log_dir, assignor=assignor)
    try:
        wait_until(
            lambda: c.committed() == dict.fromkeys(ALL, 3 * PER_PARTITION),
            "a new Java member commits round 2",
            timeout_s=120,
        )
        assert c.consumed() == {p: offsets_of_round(2) for p in ALL}
    finally:
        c.stop()


def cli_consumer_resumes(
    target: GroupTarget, topic: str, group: str, consume: Callable[[int], Records]
) -> dict[int, int]:
    """A command-line group consumer (kcat -G, the franz-go program) reads round 0 and leaves;
    its next run in the same group reads exactly from what the first committed to the end of
    round 1. Returns those committed offsets (kcat commits in the background, on a timer, so
    it may leave part of what it read uncommitted, on Kafka as here)."""
    target.new_topic(topic)
    target.produce_round(topic)
    assert sorted(consume(PARTITIONS * PER_PARTITION)) == whole_round(0)
    committed = committed_offsets(target.bootstrap, group, topic)
    target.produce_round(topic)
    end = 2 * PER_PARTITION
    expected = [(p, o) for p in sorted(ALL) for o in range(committed[p], end)]
    assert sorted(consume(len(expected))) == expected
    return committed


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offset of every partition (0 where none: the start)."""
    reader = RdkafkaMember(bootstrap, group, topic)  # OffsetFetch only: it is never polled
    try:
        return {p: max(o, 0) for p, o in reader.committed(ALL).items()}
    finally:
        reader.close()


def aiokafka_members_split_and_resume(target: GroupTarget, topic: str, group: str) -> None:
    """Two aiokafka members split the partitions and read round 0 once; two new ones resume
    from the committed offsets and read exactly round 1."""
    target.new_topic(topic)
    for round_index in (0, 1):
        a, b, held_by_a, held_by_b = asyncio.run(
            aiokafka_split_then_commit(
                target.bootstrap,
                group,
                topic,
                lambda: target.produce_round(topic),
                PARTITIONS * PER_PARTITION,
            )
        )
        assert split_between(held_by_a, held_by_b)
        assert sorted(a + b) == whole_round(round_index)


def librdkafka_static_member_restarts_without_rebalance(
    target: GroupTarget, topic: str, group: str
) -> None:
    """Static members (group.instance.id): one closes (a static member sends no LeaveGroup) and
    comes back within its session: same partitions, and the other member is not rebalanced.
    A second process with the same instance id then fences the first (FENCED_INSTANCE_ID is
    fatal to librdkafka)."""
    target.new_topic(topic)

    def static(instance: str) -> RdkafkaMember:
        return RdkafkaMember(
            target.bootstrap,
            group,
            topic,
            **{"group.instance.id": instance, "session.timeout.ms": 10_000},
        )

    a, b = static("static-a"), static("static-b")
    try:
        poll_until([a, b], lambda: split_between(a.assigned(), b.assigned()), "static split")
        held_by_b, assigned_to_a = b.assigned(), a.assignments
        b.close()
        b = static("static-b")
        poll_until([a, b], lambda: b.assigned() == held_by_b, "the static member is back")
        assert a.assignments == assigned_to_a  # no rebalance for the other member
        twin = static("static-b")
        try:
            poll_until(
                [a, b, twin],
                lambda: any(
                    error.fatal() or error.code() == KafkaError._FATAL for error in b.errors
                ),
                "the older instance is fenced",
            )
            assert a.assignments == assigned_to_a  # the takeover did not rebalance either
        finally:
            twin.close()
    finally:
        a.close()
        b.close()


def librdkafka_members_survive_a_coordinator_restart(
    target: GroupTarget, topic: str, group: str, restart: Callable[[], None]
) -> None:
    """Two members read round 0 and commit; the coordinator restarts (`restart`); they go on
    with the same partitions, without a rebalance, and read round 1 once each."""
    target.new_topic(topic)
    a = RdkafkaMember(target.bootstrap, group, topic)
    b = RdkafkaMember(target.bootstrap, group, topic)
    try:
        poll_until([a, b], lambda: split_between(a.assigned(), b.assigned()), "split")
        target.produce_round(topic)
        poll_until(
            [a, b],
            lambda: len(a.records) + len(b.records) == PARTITIONS * PER_PARTITION,
            "round 0 read",
        )
        a.commit()
        b.commit()
        before = (a.assigned(), b.assigned(), a.assignments, b.assignments)
        restart()
        target.produce_round(topic)
        poll_until(
            [a, b],
            lambda: len(a.records) + len(b.records) == 2 * PARTITIONS * PER_PARTITION,
            "round 1 read after the restart",
        )
        assert (a.assigned(), b.assigned(), a.assignments, b.assignments) == before
        assert sorted(a.records + b.records) == sorted(whole_round(0) + whole_round(1))
    finally:
        a.close()
        b.close()
