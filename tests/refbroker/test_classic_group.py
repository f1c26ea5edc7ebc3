"""ClassicGroup alone (pure logic, injected clock): states, leader, protocol, expiry."""

from __future__ import annotations

import pytest
from group_logic import CONSUMER, FakeTime, subscription
from kio.schema.errors import ErrorCode

from eoslab.refbroker.groups.classic_group import (
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    ClassicGroup,
    ClassicGroupMember,
    GroupState,
    IllegalGroupTransitionError,
    JoinResult,
    SyncResult,
    consumer_subscription_topics,
)


def member(member_id: str, *protocols: str, instance: str | None = None) -> ClassicGroupMember:
    return ClassicGroupMember(
        member_id=member_id,
        group_instance_id=instance,
        client_id="c",
        client_host="/127.0.0.1",
        rebalance_timeout_ms=30_000,
        session_timeout_ms=10_000,
        protocol_type=CONSUMER,
        protocols=tuple((p, subscription(f"topic-{p}")) for p in protocols or ("range",)),
    )


def waiting() -> list[JoinResult]:
    return []


@pytest.fixture
def clock() -> FakeTime:
    return FakeTime()


@pytest.fixture
def group(clock: FakeTime) -> ClassicGroup:
    return ClassicGroup("g", clock)


def test_the_rebalance_cycle_and_its_timestamps(group: ClassicGroup, clock: FakeTime) -> None:
    cycle = [
        GroupState.PREPARING_REBALANCE,
        GroupState.COMPLETING_REBALANCE,
        GroupState.STABLE,
        GroupState.PREPARING_REBALANCE,
        GroupState.EMPTY,
        GroupState.DEAD,
    ]
    for state in cycle:
        clock.advance(5)
        group.transition_to(state)
        assert group.state is state
        assert group.state_timestamp_ms == clock.now


@pytest.mark.parametrize(
    ("start", "to"),
    [
        (GroupState.EMPTY, GroupState.STABLE),
        (GroupState.EMPTY, GroupState.COMPLETING_REBALANCE),
        (GroupState.STABLE, GroupState.EMPTY),
        (GroupState.DEAD, GroupState.PREPARING_REBALANCE),
    ],
)
def test_transitions_kafka_never_makes_are_refused(
    clock: FakeTime, start: GroupState, to: GroupState
) -> None:
    group = ClassicGroup("g", clock, state=start)
    with pytest.raises(IllegalGroupTransitionError):
        group.transition_to(to)
    assert group.state is start


def test_the_first_member_leads_and_leadership_passes_in_join_order(group: ClassicGroup) -> None:
    for name in ("a", "b", "c"):
        group.add(member(name))
    assert group.leader_id == "a"
    assert group.protocol_type == CONSUMER
    group.remove("a")
    assert group.leader_id == "b"
    group.remove("c")
    group.remove("b")
    assert group.leader_id is None
    assert group.size == 0


def test_the_protocol_every_member_supports_wins_by_votes(group: ClassicGroup) -> None:
    group.add(member("a", "sticky", "range", "roundrobin"))
    group.add(member("b", "roundrobin", "range"))
    group.add(member("c", "range", "roundrobin"))
    # candidates: range and roundrobin; a votes range, b roundrobin, c range
    assert group.select_protocol() == "range"
    assert group.supports_protocols(CONSUMER, {"roundrobin"})
    group.transition_to(GroupState.PREPARING_REBALANCE)
    assert not group.supports_protocols(CONSUMER, {"sticky"})
    assert not group.supports_protocols("connect", {"range"})


def test_an_empty_group_takes_any_non_empty_protocol(group: ClassicGroup) -> None:
    assert group.supports_protocols("anything", {"x"})
    assert not group.supports_protocols("", {"x"})
    assert not group.supports_protocols(CONSUMER, set())


def test_next_generation_selects_the_protocol_or_empties_the_group(group: ClassicGroup) -> None:
    group.add(member("a", "range"))
    group.transition_to(GroupState.PREPARING_REBALANCE)
    group.add_pending_sync_member("a")
    group.init_next_generation()
    assert (group.generation_id, group.protocol_name) == (1, "range")
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert group.pending_sync_members == set()
    assert group.subscribed_topics == {"topic-range"}
    group.transition_to(GroupState.PREPARING_REBALANCE)
    group.remove("a")
    group.init_next_generation()
    assert (group.generation_id, group.protocol_name, group.state) == (2, None, GroupState.EMPTY)


def test_everyone_joined_only_when_no_member_id_is_pending(group: ClassicGroup) -> None:
    answers = waiting()
    group.add(member("a"), answers.append)
    assert group.has_all_members_joined()
    group.add_pending_member("p", deadline_ms=0)
    assert not group.has_all_members_joined()
    group.add(member("p"), answers.append)
    assert group.has_all_members_joined()
    assert not group.pending_members


def test_expiry_deadlines_spare_members_waiting_at_the_barrier(
    group: ClassicGroup, clock: FakeTime
) -> None:
    waiting_old, idle = member("old"), member("idle")
    for m in (waiting_old, idle):
        group.add(m)
        m.heartbeat_deadline_ms = clock.now + 10_000
    waiting_old.awaiting_join = lambda _result: None
    new = member("new")
    group.add(new, lambda _result: None)
    new.is_new = True
    new.heartbeat_deadline_ms = clock.now + NEW_MEMBER_JOIN_TIMEOUT_MS
    clock.advance(9_999)
    assert group.expired_members(clock.now) == []
    clock.advance(1)
    assert group.expired_members(clock.now) == [idle]  # a waiting member counts as alive
    clock.advance(NEW_MEMBER_JOIN_TIMEOUT_MS)
    assert group.expired_members(clock.now) == [idle, new]  # but not a new one forever


def test_a_rejoining_static_instance_fences_its_old_member_id(group: ClassicGroup) -> None:
    old_join: list[JoinResult] = []
    old_sync: list[SyncResult] = []
    static = member("old", instance="i-1")
    group.add(static, old_join.append)
    static.awaiting_sync = old_sync.append
    replaced = group.replace_static_member("i-1", "old", "new")
    assert replaced is static
    assert replaced.member_id == "new"
    assert group.current_static_member_id("i-1") == "new"
    assert group.leader_id == "new"
    assert not group.has("old")
    assert [r.error for r in old_join] == [ErrorCode.fenced_instance_id]
    assert [r.error for r in old_sync] == [ErrorCode.fenced_instance_id]


def test_a_second_member_with_the_same_instance_id_is_a_bug(group: ClassicGroup) -> None:
    group.add(member("a", instance="i"))
    with pytest.raises(IllegalGroupTransitionError):
        group.add(member("b", instance="i"))


def test_the_leader_is_replaced_by_a_member_that_rejoined(group: ClassicGroup) -> None:
    group.add(member("a"))
    group.add(member("b"), lambda _result: None)
    assert group.maybe_elect_new_joined_leader()
    assert group.leader_id == "b"
    group.get("b").awaiting_join = None
    assert not group.maybe_elect_new_joined_leader()  # nobody rejoined


@pytest.mark.parametrize(
    ("metadata", "topics"),
    [
        (subscription("a", "b"), {"a", "b"}),
        (subscription(), set()),
        (b"", None),
        (b"\x00\x00\x7f\xff\xff\xff", None),  # two billion topics in six bytes
        (b"\x00\x00\x00\x00\x00\x01\x00\x05ab", None),  # a string longer than its bytes
        (b"\x00\x00\x00\x00\x00\x01\x00\x02\xff\xfe", None),  # not UTF-8
    ],
)
def test_consumer_subscriptions_decode_or_are_unknown(
    metadata: bytes, topics: set[str] | None
) -> None:
    assert consumer_subscription_topics(metadata) == topics
