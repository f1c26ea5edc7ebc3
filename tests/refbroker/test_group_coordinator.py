"""The GroupCoordinator's rules on a fake clock (timers run when the test advances time, never
by sleeping) and a real CommittedOffsetStore in a temporary folder."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from group_logic import Answers, FakeTime, join_request, subscription, sync_request
from kio.schema.errors import ErrorCode

from eoslab.refbroker.groups.classic_group import GroupState, JoinResult, describe
from eoslab.refbroker.groups.committed_offsets import CommittedOffsetStore, OffsetAndMetadata
from eoslab.refbroker.groups.group_coordinator import GroupConfig, GroupCoordinator, LeavingMember

E = ErrorCode
DELAY_MS = 3_000
TWO_JOINERS_MS = 2 * DELAY_MS
"""The second joiner arrives during the initial delay, which then runs once more."""


@pytest.fixture
def clock() -> FakeTime:
    return FakeTime()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CommittedOffsetStore]:
    opened = CommittedOffsetStore(tmp_path / "groups", sync=False)
    yield opened
    opened.close()


def coordinator_of(store: CommittedOffsetStore, clock: FakeTime, **config: int) -> GroupCoordinator:
    ids = itertools.count()
    return GroupCoordinator(
        store,
        GroupConfig(**{"initial_rebalance_delay_ms": DELAY_MS, **config}),
        clock=clock,
        scheduler=clock,
        new_member_id=lambda prefix: f"{prefix}-{next(ids)}",
    )


@pytest.fixture
def coordinator(store: CommittedOffsetStore, clock: FakeTime) -> GroupCoordinator:
    return coordinator_of(store, clock)


def join(coordinator: GroupCoordinator, *args: object, **kwargs: object) -> Answers:
    answers = Answers()
    coordinator.handle_join_group(join_request(*args, **kwargs), answers)  # type: ignore[arg-type]
    return answers


def sync(coordinator: GroupCoordinator, *args: object, **kwargs: object) -> Answers:
    answers = Answers()
    coordinator.handle_sync_group(sync_request(*args, **kwargs), answers)  # type: ignore[arg-type]
    return answers


def joined(answers: Answers) -> JoinResult:
    result = answers.last
    assert isinstance(result, JoinResult), answers.received
    assert result.error is E.none, result
    return result


def stable_pair(coordinator: GroupCoordinator, clock: FakeTime) -> tuple[str, str]:
    """Two dynamic members in generation 1, Stable, a -> p0 and b -> p1."""
    first, second = join(coordinator, client_id="a"), join(coordinator, client_id="b")
    clock.advance(TWO_JOINERS_MS)
    a, b = joined(first).member_id, joined(second).member_id
    sync(coordinator, "g", 1, b)
    sync(coordinator, "g", 1, a, {a: b"p0", b: b"p1"})
    return a, b


def test_member_id_required_then_the_barrier_waits_the_initial_delay(
    coordinator: GroupCoordinator, clock: FakeTime
) -> None:
    first = join(coordinator, client_id="a", require_known_member_id=True)
    assert first.last == JoinResult(E.member_id_required, "a-0")
    rejoined = join(coordinator, "g", "a-0")
    second = join(coordinator, client_id="b")
    clock.advance(DELAY_MS - 1)
    assert (rejoined.last, second.last) == (None, None)  # still at the barrier
    clock.advance(1)  # b came during the delay: the delay starts again
    assert (rejoined.last, second.last) == (None, None)
    clock.advance(DELAY_MS)
    leader, follower = joined(rejoined), joined(second)
    assert (leader.generation_id, leader.leader_id, leader.protocol_name) == (1, "a-0", "range")
    assert [m.member_id for m in leader.members] == ["a-0", "b-1"]
    assert follower.members == ()
    assert coordinator.group("g").state is GroupState.COMPLETING_REBALANCE  # type: ignore[union-attr]


def test_sync_hands_out_the_leaders_assignment_and_missing_members_get_nothing(
    coordinator: GroupCoordinator, clock: FakeTime
) -> None:
    first, second = join(coordinator, client_id="a"), join(coordinator, client_id="b")
    clock.advance(TWO_JOINERS_MS)
    a, b = joined(first).member_id, joined(second).member_id
    follower = sync(coordinator, "g", 1, b)
    assert follower.last is None  # waits for the leader
    leader = sync(coordinator, "g", 1, a, {a: b"p0", "stranger": b"x"})
    assert leader.last.assignment == b"p0"  # type: ignore[union-attr]
    assert (follower.last.error, follower.last.assignment) == (E.none, b"")  # type: ignore[union-attr]
    assert coordinator.group("g").state is GroupState.STABLE  # type: ignore[union-attr]
    assert coordinator.events["rebalances"] == 1


def heartbeats(
    coordinator: GroupCoordinator, clock: FakeTime, members: list[str], until_ms: int
) -> list[ErrorCode]:
    """Every member heartbeats (generation 1) every 5 s for `until_ms`; the answers."""
    answers = []
    for _ in range(until_ms // 5_000):
        clock.advance(5_000)
        answers += [coordinator.handle_heartbeat("g", m, None, 1) for m in members]
    return answers


def test_the_rebalance_timeout_drops_members_that_did_not_rejoin(
    coordinator: GroupCoordinator, clock: FakeTime
) -> None:
    a, b = stable_pair(coordinator, clock)
    again = join(coordinator, "g", a, client_id="a")
    # b stays alive but never rejoins: the barrier waits the whole rebalance timeout (30 s)
    assert set(heartbeats(coordinator, clock, [b], 25_000)) == {E.rebalance_in_progress}
    clock.advance(4_999)
    assert again.last is None
    clock.advance(1)
    result = joined(again)
    assert (result.generation_id, [m.member_id for m in result.members]) == (2, [a])
    assert coordinator.handle_heartbeat("g", b, None, 1) is E.unknown_member_id
    assert coordinator.events["members_removed_on_rebalance"] == 1


def test_a_silent_member_expires_after_its_session_and_the_group_rebalances(
    coordinator: GroupCoordinator, clock: FakeTime
) -> None:
    a, b = stable_pair(coordinator, clock)
    assert heartbeats(coordinator, clock, [a], 15_000) == [
        E.none,
        E.rebalance_in_progress,  # b silent for 10 s: expired, the group rebalances
        E.rebalance_in_progress,
    ]
    assert coordinator.events["members_expired"] == 1
    again = join(coordinator, "g", a, client_id="a")
    assert joined(again).generation_id == 2
    assert coordinator.handle_heartbeat("g", b, None, 1) is E.unknown_member_id


def test_commits_are_fenced_by_generation_member_and_rebalance(
    coordinator: GroupCoordinator, clock: FakeTime, store: CommittedOffsetStore
) -> None:
    a, _b = stable_pair(coordinator, clock)
    offset = {("t", 0): OffsetAndMetadata(5, 0, "meta")}

    def commit(member: str, generation: int) -> ErrorCode:
        return coordinator.handle_commit_offsets("g", member, None, generation, offset)[("t", 0)]

    assert commit(a, 1) is E.none
    assert commit(a, 0) is E.illegal_generation
    assert commit("stranger", 1) is E.unknown_member_id
    assert commit("", -1) is E.unknown_member_id  # only members commit to a non-empty group
    join(coordinator, "g", a, client_id="a")  # PreparingRebalance: commits still allowed
    assert commit(a, 1) is E.none
    clock.advance(10_000)  # b's session ends: generation 2, CompletingRebalance
    assert commit(a, 2) is E.rebalance_in_progress
    assert commit(a, 1) is E.illegal_generation
    assert store.offset("g", ("t", 0)) == OffsetAndMetadata(5, 0, "meta")
    assert coordinator.events["commits_fenced"] == 4


def test_commits_without_group_management_and_fetching_unknown_offsets(
    coordinator: GroupCoordinator,
) -> None:
    offsets = {("t", 0): OffsetAndMetadata(7), ("t", 1): OffsetAndMetadata(1, metadata="x" * 4097)}
    assert coordinator.handle_commit_offsets("solo", "", None, -1, offsets) == {
        ("t", 0): E.none,
        ("t", 1): E.offset_metadata_too_large,
    }
    assert coordinator.handle_commit_offsets("never", "m", None, 3, offsets)[("t", 0)] is (
        E.illegal_generation
    )
    error, fetched = coordinator.handle_fetch_offsets("solo", [("t", 0), ("t", 1), ("u", 0)])
    assert error is E.none
    assert [(f.offset, f.error) for f in fetched.values()] == [
        (7, E.none),
        (-1, E.none),
        (-1, E.none),
    ]
    assert list(coordinator.handle_fetch_offsets("solo", None)[1]) == [("t", 0)]
    assert coordinator.handle_fetch_offsets("nobody", None) == (E.none, {})


def test_a_static_member_rejoining_fences_its_old_id_without_a_rebalance(
    coordinator: GroupCoordinator, clock: FakeTime
) -> None:
    first = join(coordinator, instance="i-a", client_id="a")
    second = join(coordinator, instance="i-b", client_id="b")
    clock.advance(TWO_JOINERS_MS)
    a, b = joined(first).member_id, joined(second).member_id
    sync(coordinator, "g", 1, b, instance="i-b")
    sync(coordinator, "g", 1, a, {a: b"p0", b: b"p1"}, instance="i-a")
    restarted = join(coordinator, instance="i-b", client_id="b", skip_assignment=True)
    result = joined(restarted)
    assert result.member_id != b
    assert (result.generation_id, result.skip_assignment) == (1, False)  # b does not lead
    assert coordinator.group("g").state is GroupState.STABLE  # type: ignore[union-attr]
    assert coordinator.handle_heartbeat("g", b, "i-b", 1) is E.fenced_instance_id
    assert coordinator.handle_heartbeat("g", result.member_id, "i-b", 1) is E.none
    assert sync(coordinator, "g", 1, result.member_id, instance="i-b").last.assignment == b"p1"  # type: ignore[union-attr]
    fenced = coordinator.handle_commit_offsets("g", b, "i-b", 1, {("t", 1): OffsetAndMetadata(3)})
    assert fenced == {("t", 1): E.fenced_instance_id}


def test_a_static_leader_rejoining_on_v9_is_told_to_skip_the_assignment(
    coordinator: GroupCoordinator, clock: FakeTime
) -> None:
    first = join(coordinator, instance="i-a", client_id="a")
    clock.advance(DELAY_MS)
    a = joined(first).member_id
    sync(coordinator, "g", 1, a, {a: b"p0"}, instance="i-a")
    result = joined(join(coordinator, instance="i-a", skip_assignment=True))
    assert (result.leader_id, result.skip_assignment) == (result.member_id, True)
    assert [m.member_id for m in result.members] == [result.member_id]


def test_join_errors_are_kafkas(coordinator: GroupCoordinator, clock: FakeTime) -> None:
    assert join(coordinator, session_ms=5_999).last.error is E.invalid_session_timeout  # type: ignore[union-attr]
    assert join(coordinator, "").last.error is E.invalid_group_id  # type: ignore[union-attr]
    assert join(coordinator, "g", "ghost").last.error is E.unknown_member_id  # type: ignore[union-attr]
    assert join(coordinator, protocols=()).last.error is E.inconsistent_group_protocol  # type: ignore[union-attr]
    member = joined_after_delay(coordinator, clock)
    other = join(coordinator, protocols=(("roundrobin", subscription("t")),))
    assert other.last.error is E.inconsistent_group_protocol  # type: ignore[union-attr]
    connect = join(coordinator, protocol_type="connect")
    assert connect.last.error is E.inconsistent_group_protocol  # type: ignore[union-attr]
    assert sync(coordinator, "g", 1, member, {}, instance="i").last.error is E.unknown_member_id  # type: ignore[union-attr]
    assert sync(coordinator, "g", 7, member).last.error is E.illegal_generation  # type: ignore[union-attr]
    assert sync(coordinator, "nope", 1, member).last.error is E.unknown_member_id  # type: ignore[union-attr]


def joined_after_delay(coordinator: GroupCoordinator, clock: FakeTime) -> str:
    answers = join(coordinator)
    clock.advance(DELAY_MS)
    return joined(answers).member_id


def test_a_member_that_never_syncs_is_removed_after_the_rebalance_timeout(
    coordinator: GroupCoordinator, clock: FakeTime
) -> None:
    first, second = join(coordinator, client_id="a"), join(coordinator, client_id="b")
    clock.advance(TWO_JOINERS_MS)
    a = joined(first).member_id
    joined(second)
    leader = sync(coordinator, "g", 1, a, {a: b"all"})
    assert leader.last.assignment == b"all"  # type: ignore[union-attr]
    b = next(m for m in coordinator.group("g").members if m != a)  # type: ignore[union-attr]
    # both alive, b never sends SyncGroup: after the rebalance timeout it is removed
    assert set(heartbeats(coordinator, clock, [a, b], 30_000)[:-2]) == {E.none}
    assert coordinator.events["members_removed_on_sync_timeout"] == 1
    assert coordinator.group("g").state is GroupState.PREPARING_REBALANCE  # type: ignore[union-attr]


def test_leave_by_member_id_by_instance_id_and_of_a_pending_member(
    coordinator: GroupCoordinator, clock: FakeTime
) -> None:
    a, b = stable_pair(coordinator, clock)
    pending = join(coordinator, client_id="c", require_known_member_id=True).last.member_id  # type: ignore[union-attr]
    error, results = coordinator.handle_leave_group(
        "g",
        [
            LeavingMember(b),
            LeavingMember(pending),
            LeavingMember("", "no-such-instance"),
            LeavingMember("x"),
        ],
    )
    assert error is E.none
    assert [e for _, e in results] == [E.none, E.none, E.unknown_member_id, E.unknown_member_id]
    assert coordinator.group("g").state is GroupState.PREPARING_REBALANCE  # type: ignore[union-attr]
    assert (
        coordinator.handle_leave_group("nope", [LeavingMember(a)])[1][0][1] is E.unknown_member_id
    )
    assert coordinator.handle_leave_group("", [])[0] is E.invalid_group_id


def test_the_last_member_leaving_empties_the_group_which_can_then_be_deleted(
    coordinator: GroupCoordinator, clock: FakeTime, store: CommittedOffsetStore
) -> None:
    a = joined_after_delay(coordinator, clock)
    sync(coordinator, "g", 1, a, {a: b"p"})
    coordinator.handle_commit_offsets("g", a, None, 1, {("t", 0): OffsetAndMetadata(3)})
    assert coordinator.handle_delete_groups(["g", "nope"]) == {
        "g": E.non_empty_group,
        "nope": E.group_id_not_found,
    }
    coordinator.handle_leave_group("g", [LeavingMember(a)])
    assert coordinator.group("g").state is GroupState.EMPTY  # type: ignore[union-attr]
    assert coordinator.handle_list_groups()[1][0].state == "Empty"
    assert coordinator.handle_delete_groups(["g"]) == {"g": E.none}
    assert store.offsets("g") == {}
    assert coordinator.handle_describe_group("g")[1].state == "Dead"


def test_offset_delete_refuses_topics_the_group_consumes(
    coordinator: GroupCoordinator, clock: FakeTime
) -> None:
    a = joined_after_delay(coordinator, clock)
    sync(coordinator, "g", 1, a, {a: b"p"})
    offsets = {("t", 0): OffsetAndMetadata(3), ("other", 0): OffsetAndMetadata(4)}
    coordinator.handle_commit_offsets("g", a, None, 1, offsets)
    assert coordinator.handle_delete_offsets("g", [("t", 0), ("other", 0)]) == (
        E.none,
        {("t", 0): E.group_subscribed_to_topic, ("other", 0): E.none},
    )
    assert coordinator.handle_fetch_offsets("g", [("other", 0)])[1][("other", 0)].offset == -1
    assert coordinator.handle_delete_offsets("nope", [("t", 0)]) == (E.group_id_not_found, {})


def test_a_group_too_large_to_store_fails_its_rebalance_like_kafka(
    store: CommittedOffsetStore, clock: FakeTime
) -> None:
    coordinator = coordinator_of(store, clock, max_record_bytes=10_000)
    huge = (("range", b"\x00" * 20_000),)
    first = join(coordinator, protocols=huge)
    clock.advance(DELAY_MS)
    a = joined(first).member_id
    answer = sync(coordinator, "g", 1, a, {a: b"p"})
    assert answer.last.error is E.unknown_server_error  # type: ignore[union-attr]
    assert coordinator.group("g").state is GroupState.PREPARING_REBALANCE  # type: ignore[union-attr]
    assert store.groups() == {}


def test_a_restarted_coordinator_loads_stable_groups_and_gives_members_a_session(
    store: CommittedOffsetStore, clock: FakeTime, coordinator: GroupCoordinator
) -> None:
    a, b = stable_pair(coordinator, clock)
    coordinator.handle_commit_offsets("g", a, None, 1, {("t", 0): OffsetAndMetadata(9, 2, "m")})
    coordinator.shutdown()
    again = coordinator_of(store, clock)
    group = again.group("g")
    assert group is not None
    assert (group.state, group.generation_id, group.leader_id) == (GroupState.STABLE, 1, a)
    assert again.handle_heartbeat("g", a, None, 1) is E.none
    assert sync(again, "g", 1, b).last.assignment == b"p1"  # type: ignore[union-attr]
    assert again.handle_fetch_offsets("g", [("t", 0)])[1][("t", 0)].leader_epoch == 2
    clock.advance(10_000)  # nobody heartbeats any more: both sessions end
    assert again.events["members_expired"] == 2


def test_the_coordinator_unavailable_fault_maps_like_a_loading_coordinator(
    coordinator: GroupCoordinator, clock: FakeTime
) -> None:
    a, _b = stable_pair(coordinator, clock)
    coordinator.unavailable.arm(3, E.coordinator_load_in_progress)
    assert coordinator.handle_heartbeat("g", a, None, 1) is E.none  # answered blindly
    assert sync(coordinator, "g", 1, a).last.error is E.rebalance_in_progress  # type: ignore[union-attr]
    assert coordinator.handle_list_groups()[0] is E.coordinator_load_in_progress
    assert coordinator.handle_list_groups()[0] is E.none


def test_faults_force_a_rebalance_and_expire_members(
    coordinator: GroupCoordinator, clock: FakeTime
) -> None:
    a, b = stable_pair(coordinator, clock)
    assert coordinator.force_rebalance("g") == "PreparingRebalance"
    assert coordinator.handle_heartbeat("g", a, None, 1) is E.rebalance_in_progress
    assert coordinator.expire_members("g", b) == [b]
    again = joined(join(coordinator, "g", a, client_id="a"))
    assert [m.member_id for m in again.members] == [a]
    with pytest.raises(ValueError, match="no member"):
        coordinator.expire_members("g", "ghost")
    with pytest.raises(ValueError, match="no group"):
        coordinator.force_rebalance("nope")


def test_a_protocol_named_empty_is_still_a_protocol(
    coordinator: GroupCoordinator, clock: FakeTime
) -> None:
    """Found by `make soak`: a group whose one protocol is named "" completed its join with an
    internal error (no member metadata), and its members' JoinGroup were never answered.
    Kafka's currentMemberMetadata only refuses Dead and PreparingRebalance groups."""
    answers = join(coordinator, protocols=(("", b"metadata"),))
    clock.advance(DELAY_MS)
    leader = joined(answers)
    assert (leader.protocol_name, [m.metadata for m in leader.members]) == ("", [b"metadata"])
    sync(coordinator, "g", 1, leader.member_id, {leader.member_id: b"p0"})
    described = describe(coordinator.group("g"))
    assert (described.protocol, described.members[0].metadata) == ("", b"metadata")
