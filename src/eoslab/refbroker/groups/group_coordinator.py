"""The group coordinator: Kafka 3.9's classic GroupCoordinator for the single reference broker.

Rules are Kafka's (core/.../coordinator/group/GroupCoordinator.scala, the coordinator a
ZooKeeper-mode 3.9 broker runs), method by method: JoinGroup with MEMBER_ID_REQUIRED (v4+),
the barrier that answers every member once all known members rejoined or the rebalance
timeout passed, `group.initial.rebalance.delay.ms` for a group that was empty, the first
joiner as leader, SyncGroup handing out the leader's assignment, heartbeats and session
expiry, LeaveGroup, generation fencing of commits (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
REBALANCE_IN_PROGRESS), static membership (`group.instance.id`, FENCED_INSTANCE_ID), the
admin APIs (ListGroups, DescribeGroups, DeleteGroups, OffsetDelete, OffsetFetch), and
transactional offset commits (TxnOffsetCommit, KIP-98/KIP-447: offsets pending under their
producer id until the transaction coordinator's marker reaches the group's __consumer_offsets
partition, then committed or dropped; OffsetFetch with `require_stable` answers
UNSTABLE_OFFSET_COMMIT for a partition with pending offsets, as Kafka does).

Kafka's delayed operations become timers (an injected Scheduler, the asyncio loop in the
broker): DelayedJoin and InitialDelayedJoin are the group's join timer, DelayedSync its sync
timer, DelayedHeartbeat one timer per member (and per pending member). A timer that fires
looks at the group's deadlines (classic_group.py) and acts as the delayed operation's
expiration would. Results go to callbacks, as in Kafka; `join_group` and `sync_group` wrap
them in asyncio futures, which is how a JoinGroup request waits at the barrier. Everything
runs on the broker's single event loop, so each request is applied atomically.

Committed offsets and group metadata are stored by CommittedOffsetStore
(committed_offsets.py) before a commit or a rebalance is acknowledged; a restarted
coordinator loads them (GroupMetadataManager.loadGroupsAndOffsets): groups with members come
back Stable with their generation and assignments, and every member gets a fresh session.

How it differs from Kafka 3.9's coordinator:
    1. One broker coordinates every group: FindCoordinator always names this broker. The
       __consumer_offsets topic is made by the first FindCoordinator for a group, as in Kafka,
       but stays empty (internal_topics.py): offsets and groups are kept in this broker's own
       file (committed_offsets.py), so replication and NOT_COORDINATOR after a partition move
       do not exist, a fresh broker does not answer the first FindCoordinator with
       COORDINATOR_NOT_AVAILABLE while it creates that topic (it answers once it is made), and
       there is no loading phase: COORDINATOR_LOAD_IN_PROGRESS is only answered by the
       coordinator-unavailable fault, NOT_COORDINATOR by that fault and, as Kafka maps
       KAFKA_STORAGE_ERROR, when a write to disk fails.
    2. Writes are synchronous: a commit or a group record is on disk (fsynced under
       --fsync every-batch) when the call returns, so there are no pending plain offset commits
       (only transactional ones make OffsetFetch with require_stable answer
       UNSTABLE_OFFSET_COMMIT).
    3. No offset expiry (offsets.retention.minutes, and with it the removal of an empty group
       whose offsets all expired): offsets stay until OffsetDelete or DeleteGroups removes
       them. DeleteTopics keeps them too (Kafka's handleDeletedPartitions drops them).
    4. A transaction's commit makes its pending offsets the committed ones, even over a plain
       OffsetCommit of the same partition made after the TxnOffsetCommit (Kafka keeps the one
       appended last to __consumer_offsets).
    5. A JoinGroup or SyncGroup superseded by another from the same member (a client that
       gave up on the first and resent it) is answered with REBALANCE_IN_PROGRESS; Kafka
       never answers it. The connection that sent it is serialised behind it here, so an
       unanswered request would hold it forever.
    6. The `expire-member` fault answers a JoinGroup or SyncGroup the member still waits in
       with UNKNOWN_MEMBER_ID; a session expiry in Kafka cannot hit a waiting member.
    7. Members are kept in join order, so a new leader (when the leader leaves) and the
       order of members in answers are deterministic (Kafka: a HashMap).
    8. Offset metadata length is counted in code points (Kafka: UTF-16 units of a Java
       String); the limit is the same, offset.metadata.max.bytes = 4096.
    9. No quotas, no authorizer: never GROUP_AUTHORIZATION_FAILED; DescribeGroups' authorized
       operations are those Kafka reports without an authorizer (READ, DELETE, DESCRIBE).
    10. Only the classic protocol: KIP-848's ConsumerGroupHeartbeat and ConsumerGroupDescribe,
        which a 3.9 broker advertises, are not served (clients default to the classic
        protocol), nor are share groups. OffsetCommit v0-1 and OffsetFetch v0 (ZooKeeper-era
        versions kio has no schema for) are not advertised.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from kio.schema.errors import ErrorCode

from eoslab.refbroker.groups.classic_group import (
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    UNKNOWN_MEMBER_ID,
    ClassicGroup,
    ClassicGroupMember,
    Clock,
    GroupDescription,
    GroupState,
    JoinCallback,
    JoinResult,
    Protocols,
    SyncCallback,
    SyncResult,
    describe,
)
from eoslab.refbroker.groups.committed_offsets import (
    CommittedOffsetStore,
    GroupRecord,
    MemberRecord,
    OffsetAndMetadata,
    TopicPartition,
)
from eoslab.refbroker.internal_topics import offsets_partition_for
from eoslab.refbroker.scheduler import LoopScheduler, Scheduler, Timer
from eoslab.refbroker.topic_configs import DEFAULT_MESSAGE_MAX_BYTES

log = logging.getLogger(__name__)

E = ErrorCode
R = TypeVar("R")
CLASSIC = "classic"
INVALID_OFFSET = -1


class GroupApi(enum.Enum):
    """The APIs that go through validateGroupStatus."""

    JOIN_GROUP = enum.auto()
    SYNC_GROUP = enum.auto()
    HEARTBEAT = enum.auto()
    LEAVE_GROUP = enum.auto()
    OFFSET_DELETE = enum.auto()
    OFFSET_COMMIT = enum.auto()
    TXN_OFFSET_COMMIT = enum.auto()
    OFFSET_FETCH = enum.auto()
    DESCRIBE_GROUPS = enum.auto()
    DELETE_GROUPS = enum.auto()


EMPTY_GROUP_ID_VALID = frozenset(
    {
        GroupApi.OFFSET_COMMIT,
        GroupApi.OFFSET_FETCH,
        GroupApi.DESCRIBE_GROUPS,
        GroupApi.DELETE_GROUPS,
    }
)
"""Kafka accepts "" for these, for backwards compatibility; the others need a real group id."""


@dataclass(frozen=True)
class GroupConfig:
    """Kafka's group.* and offset.* broker settings, with Kafka's defaults."""

    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    initial_rebalance_delay_ms: int = 3_000
    offset_metadata_max_bytes: int = 4_096
    max_record_bytes: int = DEFAULT_MESSAGE_MAX_BYTES
    """message.max.bytes: a group record (members' subscriptions and assignments) larger than
    this cannot be stored, and the rebalance fails with UNKNOWN_SERVER_ERROR, as in Kafka."""


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    require_known_member_id: bool
    """JoinGroup v4+ from a dynamic member: answer MEMBER_ID_REQUIRED to a first join."""
    support_skipping_assignment: bool
    """JoinGroup v9+."""
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    reason: str | None = None


@dataclass(frozen=True)
class SyncRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: Mapping[str, bytes]


@dataclass(frozen=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = CLASSIC


@dataclass(frozen=True)
class TxnCommit:
    """Who commits offsets in a transaction (TxnOffsetCommit; member fields from v3)."""

    group_id: str
    producer_id: int
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    generation_id: int = -1


@dataclass(frozen=True)
class FetchedOffset:
    offset: int = INVALID_OFFSET
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = E.none


class UnavailableCoordinator:
    """The `coordinator-unavailable` fault: the next N group requests get `error` where Kafka's
    validateGroupStatus would find the coordinator unavailable, moved or loading."""

    def __init__(self) -> None:
        self.remaining = 0
        self.error = E.coordinator_not_available

    def arm(self, count: int, error: ErrorCode) -> None:
        self.remaining, self.error = count, error

    def take(self) -> ErrorCode | None:
        if self.remaining <= 0:
            return None
        self.remaining -= 1
        return self.error

    def clear(self) -> None:
        self.remaining = 0


@dataclass
class _Timers:
    join: Timer | None = None
    initial_join: tuple[int, int] | None = None
    """(delay, remaining) of an InitialDelayedJoin; None for a plain DelayedJoin."""
    sync: Timer | None = None
    heartbeats: dict[str, Timer] = field(default_factory=dict)
    pending: dict[str, Timer] = field(default_factory=dict)

    def cancel_all(self) -> None:
        for timer in (self.join, self.sync, *self.heartbeats.values(), *self.pending.values()):
            if timer is not None:
                timer.cancel()
        self.join = self.sync = None
        self.heartbeats.clear()
        self.pending.clear()


class GroupCoordinator:
    """Every group of the broker, their timers, and their durable offsets."""

    def __init__(
        self,
        store: CommittedOffsetStore,
        config: GroupConfig | None = None,
        *,
        clock: Clock = monotonic_ms,
        scheduler: Scheduler | None = None,
        unavailable: UnavailableCoordinator | None = None,
        events: Counter[str] | None = None,
        new_member_id: Callable[[str], str] | None = None,
    ) -> None:
        self.store = store
        self.config = config or GroupConfig()
        self.clock = clock
        self.scheduler = scheduler or LoopScheduler()
        self.unavailable = unavailable or UnavailableCoordinator()
        self.events: Counter[str] = Counter() if events is None else events
        """rebalances, members_expired, members_removed_on_rebalance, ... (the counters)."""
        self._new_member_id = new_member_id
        self._groups: dict[str, ClassicGroup] = {}
        self._timers: dict[str, _Timers] = {}
        self._load()

    # ---------------------------------------------------------------- lifecycle

    def _load(self) -> None:
        """onElection + onGroupLoaded: stored groups come back, members with a fresh session."""
        records = self.store.groups()
        for group_id in sorted(self.store.group_ids()):
            record = records.get(group_id)
            group = self._add_group(group_id)
            if record is None:
                continue
            group.generation_id = record.generation_id
            group.protocol_type = record.protocol_type
            group.protocol_name = record.protocol_name
            for stored in record.members:
                group.add(
                    ClassicGroupMember(
                        member_id=stored.member_id,
                        group_instance_id=stored.group_instance_id,
                        client_id=stored.client_id,
                        client_host=stored.client_host,
                        rebalance_timeout_ms=stored.rebalance_timeout_ms,
                        session_timeout_ms=stored.session_timeout_ms,
                        protocol_type=record.protocol_type or "",
                        protocols=((record.protocol_name or "", stored.subscription),),
                        assignment=stored.assignment,
                    )
                )
            group.leader_id = record.leader_id if record.members else None
            if group.members:
                group.state = GroupState.STABLE
            group.subscribed_topics = group.compute_subscribed_topics()
            for member in group.all_members():
                self._schedule_heartbeat(group, member, member.session_timeout_ms)

    def shutdown(self) -> None:
        """Stop every timer: a crashed or stopped coordinator must not act any more."""
        for timers in self._timers.values():
            timers.cancel_all()
        for group in self._groups.values():
            group.state = GroupState.DEAD

    def group(self, group_id: str) -> ClassicGroup | None:
        return self._groups.get(group_id)

    def _add_group(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id, self.clock, new_member_id=self._new_member_id)
        self._groups[group_id] = group
        self._timers[group_id] = _Timers()
        return group

    def _validate_group_status(self, group_id: str | None, api: GroupApi) -> ErrorCode | None:
        if group_id is None or (not group_id and api not in EMPTY_GROUP_ID_VALID):
            return E.invalid_group_id
        return self.unavailable.take()

    # ---------------------------------------------------------------- JoinGroup

    async def join_group(self, request: JoinRequest) -> JoinResult:
        """handle_join_group, waiting at the barrier until the group answers."""
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        self.handle_join_group(request, _resolver(future))
        return await future

    def handle_join_group(self, request: JoinRequest, callback: JoinCallback) -> None:
        if (
            error := self._validate_group_status(request.group_id, GroupApi.JOIN_GROUP)
        ) is not None:
            callback(JoinResult(error, request.member_id))
            return
        config = self.config
        if (
            not config.min_session_timeout_ms
            <= request.session_timeout_ms
            <= (config.max_session_timeout_ms)
        ):
            callback(JoinResult(E.invalid_session_timeout, request.member_id))
            return
        is_unknown_member = request.member_id == UNKNOWN_MEMBER_ID
        group = self._groups.get(request.group_id)
        if group is None:
            if not is_unknown_member:
                callback(JoinResult(E.unknown_member_id, request.member_id))
                return
            group = self._add_group(request.group_id)
        if not self._accept_joining_member(group, request.member_id):
            group.remove(request.member_id)
            callback(JoinResult(E.group_max_size_reached, UNKNOWN_MEMBER_ID))
        elif is_unknown_member:
            self._new_member_join(group, request, callback)
        else:
            self._current_member_join(group, request, callback)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_(GroupState.PREPARING_REBALANCE):
            return (
                group.has(member_id) and group.get(member_id).is_awaiting_join
            ) or group.num_awaiting_join < self.config.max_size
        return group.has(member_id) or group.size < self.config.max_size

    def _new_member_join(
        self, group: ClassicGroup, request: JoinRequest, callback: JoinCallback
    ) -> None:
        protocol_names = {name for name, _ in request.protocols}
        if group.is_(GroupState.DEAD):
            callback(JoinResult(E.coordinator_not_available, UNKNOWN_MEMBER_ID))
            return
        if not group.supports_protocols(request.protocol_type, protocol_names):
            callback(JoinResult(E.inconsistent_group_protocol, UNKNOWN_MEMBER_ID))
            return
        new_member_id = group.generate_member_id(request.client_id, request.group_instance_id)
        instance_id = request.group_instance_id
        if instance_id is not None:
            old_member_id = group.current_static_member_id(instance_id)
            if old_member_id is None:
                self._add_member_and_rebalance(group, request, new_member_id, callback)
            else:
                self._update_static_member_and_rebalance(
                    group, request, old_member_id, new_member_id, callback
                )
        elif request.require_known_member_id:
            group.add_pending_member(new_member_id, self.clock() + request.session_timeout_ms)
            self._schedule_pending_expiry(group, new_member_id, request.session_timeout_ms)
            callback(JoinResult(E.member_id_required, new_member_id))
        else:
            self._add_member_and_rebalance(group, request, new_member_id, callback)

    def _current_member_join(
        self, group: ClassicGroup, request: JoinRequest, callback: JoinCallback
    ) -> None:
        member_id = request.member_id
        protocol_names = {name for name, _ in request.protocols}
        if group.is_(GroupState.DEAD):
            callback(JoinResult(E.coordinator_not_available, member_id))
        elif not group.supports_protocols(request.protocol_type, protocol_names):
            callback(JoinResult(E.inconsistent_group_protocol, member_id))
        elif group.is_pending_member(member_id):
            if request.group_instance_id is not None:
                # Kafka throws IllegalStateException here: the client gets UNKNOWN_SERVER_ERROR
                callback(JoinResult(E.unknown_server_error, member_id))
                return
            self._add_member_and_rebalance(group, request, member_id, callback)
        elif (
            error := _validate_current_member(group, member_id, request.group_instance_id)
        ) is not None:
            callback(JoinResult(error, member_id))
        else:
            member = group.get(member_id)
            match group.state:
                case GroupState.PREPARING_REBALANCE:
                    self._update_member_and_rebalance(group, member, request, callback)
                case GroupState.COMPLETING_REBALANCE if member.matches(request.protocols):
                    # the member missed the answer to its JoinGroup: send it again
                    callback(self._join_result(group, member, with_members=True))
                case GroupState.COMPLETING_REBALANCE:
                    self._update_member_and_rebalance(group, member, request, callback)
                case GroupState.STABLE if group.is_leader(member_id) or not member.matches(
                    request.protocols
                ):
                    # a leader's rejoin forces a rebalance (e.g. for new topic metadata)
                    self._update_member_and_rebalance(group, member, request, callback)
                case GroupState.STABLE:
                    callback(self._join_result(group, member, with_members=False))
                case _:  # Empty or Dead: the member must reset its generation and rejoin
                    callback(JoinResult(E.unknown_member_id, member_id))

    def _join_result(
        self, group: ClassicGroup, member: ClassicGroupMember, *, with_members: bool
    ) -> JoinResult:
        """The current generation's answer; only the leader gets the members' metadata."""
        leader = group.is_leader(member.member_id)
        return JoinResult(
            E.none,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            group.current_member_metadata() if with_members and leader else (),
        )

    def _add_member_and_rebalance(
        self, group: ClassicGroup, request: JoinRequest, member_id: str, callback: JoinCallback
    ) -> None:
        member = ClassicGroupMember(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
            is_new=True,
        )
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        self._cancel(self._timers[group.group_id].pending, member_id)
        group.add(member, callback)
        # a new member cannot heartbeat before its first answer: it gets 5 minutes to rejoin
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(
            group, f"adding new member {member_id}; client reason: {request.reason}"
        )

    def _update_member_and_rebalance(
        self,
        group: ClassicGroup,
        member: ClassicGroupMember,
        request: JoinRequest,
        callback: JoinCallback,
    ) -> None:
        _supersede_join(member)
        group.update_member(
            member,
            request.protocols,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            callback,
        )
        self._maybe_prepare_rebalance(
            group, f"member {member.member_id} rejoining; client reason: {request.reason}"
        )

    def _update_static_member_and_rebalance(
        self,
        group: ClassicGroup,
        request: JoinRequest,
        old_member_id: str,
        new_member_id: str,
        callback: JoinCallback,
    ) -> None:
        instance_id = request.group_instance_id
        assert instance_id is not None
        current_leader = group.leader_id or ""
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self._move_heartbeat(group, old_member_id, member)
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(
            member,
            request.protocols,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            callback,
        )
        match group.state:
            case GroupState.STABLE if group.protocol_name == group.select_protocol():
                assignment = {m.member_id: m.assignment for m in group.all_members()}
                error = self._store_group(group, assignment)
                if error is not E.none:
                    group.update_member(member, *old, None)
                    reverted = group.replace_static_member(
                        instance_id, new_member_id, old_member_id
                    )
                    self._move_heartbeat(group, new_member_id, reverted)
                    callback(
                        JoinResult(
                            error,
                            UNKNOWN_MEMBER_ID,
                            group.generation_id,
                            group.protocol_type,
                            group.protocol_name,
                            current_leader,
                        )
                    )
                elif request.support_skipping_assignment:
                    # v9+: the static leader is told it leads, and to skip the assignment
                    is_leader = group.is_leader(new_member_id)
                    result = self._join_result(group, member, with_members=True)
                    group.maybe_invoke_join_callback(
                        member, replace(result, skip_assignment=is_leader)
                    )
                else:
                    # before v9: the old leader id, so a rejoining leader does not reassign
                    result = self._join_result(group, member, with_members=False)
                    group.maybe_invoke_join_callback(
                        member, replace(result, leader_id=current_leader)
                    )
            case GroupState.STABLE:
                self._maybe_prepare_rebalance(
                    group, f"static member {instance_id} changed protocol"
                )
            case GroupState.COMPLETING_REBALANCE:
                self._prepare_rebalance(group, f"static member {instance_id} rejoined")
            case _:  # PreparingRebalance: it waits at the barrier like everyone else
                pass

    def _maybe_prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.rebalance_in_progress)
        self._remove_sync_expiration(group)
        was_empty = group.is_(GroupState.EMPTY)
        delay = self.config.initial_rebalance_delay_ms
        remaining = max(group.rebalance_timeout_ms - delay, 0)
        timeout = group.rebalance_timeout_ms
        group.transition_to(GroupState.PREPARING_REBALANCE)
        log.info(
            "preparing to rebalance group %s (generation %d): %s",
            group.group_id,
            group.generation_id,
            reason,
        )
        if was_empty:
            self._schedule_join(group, delay, initial=(delay, remaining))
        else:
            self._schedule_join(group, timeout, initial=None)

    def _schedule_join(
        self, group: ClassicGroup, delay_ms: int, initial: tuple[int, int] | None
    ) -> None:
        """A DelayedJoin (initial=None: it completes as soon as everyone rejoined) or an
        InitialDelayedJoin (it only completes when its delay ends)."""
        timers = self._timers[group.group_id]
        if timers.join is not None:
            timers.join.cancel()
        timers.initial_join = initial
        timers.join = self.scheduler.call_later(delay_ms / 1000, lambda: self._on_join_timer(group))
        if initial is None:
            self._try_complete_join(group)

    def _try_complete_join(self, group: ClassicGroup) -> None:
        """DelayedJoin.tryComplete: rebalancePurgatory.checkAndComplete(GroupJoinKey)."""
        timers = self._timers[group.group_id]
        if timers.join is None or timers.initial_join is not None:
            return
        if group.has_all_members_joined():
            timers.join.cancel()
            timers.join = None
            self._on_complete_join(group)

    def _on_join_timer(self, group: ClassicGroup) -> None:
        timers = self._timers[group.group_id]
        timers.join = None
        if timers.initial_join is not None:
            delay, remaining = timers.initial_join
            if group.new_member_added and remaining != 0:
                # more members arrived during the delay: wait again, within the rebalance timeout
                group.new_member_added = False
                next_delay = min(self.config.initial_rebalance_delay_ms, remaining)
                next_remaining = max(remaining - delay, 0)
                self._schedule_join(group, next_delay, initial=(next_delay, next_remaining))
                return
        self._on_complete_join(group)

    def _on_complete_join(self, group: ClassicGroup) -> None:
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                group.remove(member.member_id)
                self._cancel(self._timers[group.group_id].heartbeats, member.member_id)
                self.events["members_removed_on_rebalance"] += 1
        if group.is_(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # nobody rejoined: wait for the session timeouts to remove the silent members
            self._schedule_join(group, group.rebalance_timeout_ms, initial=None)
            return
        group.init_next_generation()
        if group.is_(GroupState.EMPTY):
            if (error := self._store_group(group, {})) is not E.none:
                log.warning("could not store empty group %s: %s", group.group_id, error.name)
            return
        log.info(
            "group %s generation %d: %d members",
            group.group_id,
            group.generation_id,
            group.size,
        )
        for member in group.all_members():
            group.maybe_invoke_join_callback(
                member, self._join_result(group, member, with_members=True)
            )
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        self._schedule_pending_sync(group)

    # ---------------------------------------------------------------- SyncGroup

    async def sync_group(self, request: SyncRequest) -> SyncResult:
        """handle_sync_group, waiting for the leader's assignment when needed."""
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        self.handle_sync_group(request, _resolver(future))
        return await future

    def handle_sync_group(self, request: SyncRequest, callback: SyncCallback) -> None:
        error = self._validate_group_status(request.group_id, GroupApi.SYNC_GROUP)
        if error is E.coordinator_load_in_progress:
            # the rebalance state is lost while loading: have the member rejoin
            callback(SyncResult(E.rebalance_in_progress))
            return
        if error is not None:
            callback(SyncResult(error))
            return
        group = self._groups.get(request.group_id)
        if group is None:
            callback(SyncResult(E.unknown_member_id))
            return
        if (error := self._validate_sync_group(group, request)) is not None:
            callback(SyncResult(error))
            return
        member = group.get(request.member_id)
        match group.state:
            case GroupState.EMPTY:
                callback(SyncResult(E.unknown_member_id))
            case GroupState.PREPARING_REBALANCE:
                callback(SyncResult(E.rebalance_in_progress))
            case GroupState.COMPLETING_REBALANCE:
                _supersede_sync(member)
                member.awaiting_sync = callback
                self._remove_pending_sync_member(group, member.member_id)
                if group.is_leader(member.member_id):
                    self._complete_sync(group, request.assignments)
            case GroupState.STABLE:
                self._remove_pending_sync_member(group, member.member_id)
                callback(
                    SyncResult(E.none, group.protocol_type, group.protocol_name, member.assignment)
                )
                self._schedule_heartbeat(group, member, member.session_timeout_ms)
            case GroupState.DEAD:
                callback(SyncResult(E.coordinator_not_available))

    def _validate_sync_group(self, group: ClassicGroup, request: SyncRequest) -> ErrorCode | None:
        if group.is_(GroupState.DEAD):
            return E.coordinator_not_available
        error = _validate_current_member(group, request.member_id, request.group_instance_id)
        if error is not None:
            return error
        if request.generation_id != group.generation_id:
            return E.illegal_generation
        if request.protocol_type is not None and request.protocol_type != group.protocol_type:
            return E.inconsistent_group_protocol
        if request.protocol_name is not None and request.protocol_name != group.protocol_name:
            return E.inconsistent_group_protocol
        return None

    def _complete_sync(self, group: ClassicGroup, assignments: Mapping[str, bytes]) -> None:
        """The leader's assignment: store the group, then answer every waiting member."""
        assignment = {m.member_id: assignments.get(m.member_id, b"") for m in group.all_members()}
        error = self._store_group(group, assignment)
        if error is not E.none:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(group, f"error {error.name} storing the assignment")
            return
        for member in group.all_members():
            member.assignment = assignment[member.member_id]
        self._propagate_assignment(group, E.none)
        group.transition_to(GroupState.STABLE)
        self.events["rebalances"] += 1

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.all_members():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        protocol_type, protocol_name = (
            (group.protocol_type, group.protocol_name) if error is E.none else (None, None)
        )
        for member in group.all_members():
            result = SyncResult(error, protocol_type, protocol_name, member.assignment)
            if group.maybe_invoke_sync_callback(member, result):
                # a session may have run out while the member waited: give it a fresh one
                self._schedule_heartbeat(group, member, member.session_timeout_ms)

    def _schedule_pending_sync(self, group: ClassicGroup) -> None:
        """DelayedSync: members that do not send SyncGroup within the rebalance timeout go."""
        timers = self._timers[group.group_id]
        if timers.sync is not None:
            timers.sync.cancel()
        generation = group.generation_id
        timers.sync = self.scheduler.call_later(
            group.rebalance_timeout_ms / 1000, lambda: self._on_sync_timer(group, generation)
        )

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.remove_pending_sync_member(member_id)
        self._maybe_complete_sync_expiration(group)

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self._maybe_complete_sync_expiration(group)

    def _maybe_complete_sync_expiration(self, group: ClassicGroup) -> None:
        timers = self._timers[group.group_id]
        if timers.sync is not None and group.has_received_sync_from_all_members():
            timers.sync.cancel()
            timers.sync = None

    def _on_sync_timer(self, group: ClassicGroup, generation: int) -> None:
        self._timers[group.group_id].sync = None
        if generation != group.generation_id or group.state not in (
            GroupState.COMPLETING_REBALANCE,
            GroupState.STABLE,
        ):
            return
        if group.has_received_sync_from_all_members():
            return
        missing = sorted(group.pending_sync_members)
        for member_id in missing:
            group.remove(member_id)
            self._cancel(self._timers[group.group_id].heartbeats, member_id)
            self.events["members_removed_on_sync_timeout"] += 1
        self._prepare_rebalance(group, f"no SyncGroup from {missing}")

    # ---------------------------------------------------------------- Heartbeat

    def handle_heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        error = self._validate_group_status(group_id, GroupApi.HEARTBEAT)
        if error is E.coordinator_load_in_progress:
            return E.none  # the group is still loading: Kafka answers blindly
        if error is not None:
            return error
        group = self._groups.get(group_id)
        if group is None:
            return E.unknown_member_id
        if group.is_(GroupState.DEAD):
            return E.coordinator_not_available
        error = _validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return E.illegal_generation
        if group.is_(GroupState.EMPTY):
            return E.unknown_member_id
        member = group.get(member_id)
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return E.rebalance_in_progress
        return E.none

    def _schedule_heartbeat(
        self, group: ClassicGroup, member: ClassicGroupMember, timeout_ms: int
    ) -> None:
        """completeAndScheduleNextExpiration: the member must show life within `timeout_ms`."""
        member.heartbeat_deadline_ms = self.clock() + timeout_ms
        timers = self._timers[group.group_id].heartbeats
        self._cancel(timers, member.member_id)
        member_id = member.member_id
        timers[member_id] = self.scheduler.call_later(
            timeout_ms / 1000, lambda: self._on_heartbeat_timer(group, member_id)
        )

    def _move_heartbeat(
        self, group: ClassicGroup, old_member_id: str, member: ClassicGroupMember
    ) -> None:
        self._cancel(self._timers[group.group_id].heartbeats, old_member_id)
        self._schedule_heartbeat(group, member, member.session_timeout_ms)

    def _on_heartbeat_timer(self, group: ClassicGroup, member_id: str) -> None:
        timers = self._timers[group.group_id].heartbeats
        timers.pop(member_id, None)
        member = group.members.get(member_id)
        if group.is_(GroupState.DEAD) or member is None:
            return
        now = self.clock()
        if now < member.heartbeat_deadline_ms:  # the timer ran early by the clocks' skew
            delay = (member.heartbeat_deadline_ms - now) / 1000
            timers[member_id] = self.scheduler.call_later(
                delay, lambda: self._on_heartbeat_timer(group, member_id)
            )
            return
        if member.heartbeat_expired(now):
            log.info("member %s of group %s has failed", member_id, group.group_id)
            self.events["members_expired"] += 1
            self._remove_member_and_update_group(group, member)

    def _schedule_pending_expiry(
        self, group: ClassicGroup, member_id: str, timeout_ms: int
    ) -> None:
        timers = self._timers[group.group_id].pending
        self._cancel(timers, member_id)
        timers[member_id] = self.scheduler.call_later(
            timeout_ms / 1000, lambda: self._on_pending_timer(group, member_id)
        )

    def _on_pending_timer(self, group: ClassicGroup, member_id: str) -> None:
        self._timers[group.group_id].pending.pop(member_id, None)
        if not group.is_(GroupState.DEAD) and group.is_pending_member(member_id):
            self._remove_pending_member_and_update_group(group, member_id)

    @staticmethod
    def _cancel(timers: dict[str, Timer], key: str) -> None:
        timer = timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def _remove_member_and_update_group(
        self, group: ClassicGroup, member: ClassicGroupMember
    ) -> None:
        # a new member may still wait in JoinGroup: it is told to rejoin
        group.maybe_invoke_join_callback(member, JoinResult(E.unknown_member_id, UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self._cancel(self._timers[group.group_id].heartbeats, member.member_id)
        match group.state:
            case GroupState.STABLE | GroupState.COMPLETING_REBALANCE:
                self._maybe_prepare_rebalance(group, f"removing member {member.member_id}")
            case GroupState.PREPARING_REBALANCE:
                self._try_complete_join(group)
            case _:
                pass

    def _remove_pending_member_and_update_group(self, group: ClassicGroup, member_id: str) -> None:
        group.remove(member_id)
        self._cancel(self._timers[group.group_id].pending, member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # ---------------------------------------------------------------- LeaveGroup

    def handle_leave_group(
        self, group_id: str, leaving: Iterable[LeavingMember]
    ) -> tuple[ErrorCode, list[tuple[LeavingMember, ErrorCode]]]:
        """(top-level error, each leaving member's error)."""
        leaving = list(leaving)
        error = self._validate_group_status(group_id, GroupApi.LEAVE_GROUP)
        if error is not None:
            return error, []
        group = self._groups.get(group_id)
        if group is None:
            return E.none, [(m, E.unknown_member_id) for m in leaving]
        if group.is_(GroupState.DEAD):
            return E.coordinator_not_available, []
        return E.none, [(m, self._leave(group, m)) for m in leaving]

    def _leave(self, group: ClassicGroup, leaving: LeavingMember) -> ErrorCode:
        if leaving.member_id == UNKNOWN_MEMBER_ID:
            # an administrative removal by group.instance.id
            current = (
                None
                if leaving.group_instance_id is None
                else group.current_static_member_id(leaving.group_instance_id)
            )
            if current is None:
                return E.unknown_member_id
            self._remove_member_and_update_group(group, group.get(current))
            return E.none
        if group.is_pending_member(leaving.member_id):
            self._remove_pending_member_and_update_group(group, leaving.member_id)
            return E.none
        error = _validate_current_member(group, leaving.member_id, leaving.group_instance_id)
        if error is not None:
            return error
        log.info(
            "member %s leaves group %s; client reason: %s",
            leaving.member_id,
            group.group_id,
            leaving.reason,
        )
        self._remove_member_and_update_group(group, group.get(leaving.member_id))
        return E.none

    # ---------------------------------------------------------------- offsets

    def handle_commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        if (error := self._validate_group_status(group_id, GroupApi.OFFSET_COMMIT)) is not None:
            return dict.fromkeys(offsets, error)
        group = self._groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # from a generation this coordinator never had: fence it
                return dict.fromkeys(offsets, E.illegal_generation)
            # not using group management (assign() and commit): the group is created empty
            group = self._add_group(group_id)
        error = _validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is not None:
            self.events["commits_fenced"] += 1
            return dict.fromkeys(offsets, error)
        match group.state:
            case GroupState.COMPLETING_REBALANCE:
                return dict.fromkeys(offsets, E.rebalance_in_progress)
            case GroupState.STABLE | GroupState.PREPARING_REBALANCE:
                member = group.get(member_id)
                self._schedule_heartbeat(group, member, member.session_timeout_ms)
            case _:
                pass
        return self._store_offsets(group, offsets)

    def handle_txn_commit_offsets(
        self,
        commit: TxnCommit,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        verify: Callable[[], ErrorCode],
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: `verify` asks the transaction coordinator whether the group's
        offsets partition is in the producer's transaction (KIP-890 part 1)."""
        error = self._validate_group_status(commit.group_id, GroupApi.TXN_OFFSET_COMMIT)
        if error is None and (verified := verify()) is not E.none:
            error = verified
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self._groups.get(commit.group_id) or self._add_group(commit.group_id)
        error = _validate_offset_commit(
            group,
            commit.generation_id,
            commit.member_id,
            commit.group_instance_id,
            is_transactional=True,
        )
        if error is not None:
            self.events["commits_fenced"] += 1
            return dict.fromkeys(offsets, error)
        return self._store_offsets(group, offsets, commit.producer_id)

    def complete_transaction(self, producer_id: int, offsets_partition: int, commit: bool) -> bool:
        """The transaction marker in the offsets partition `offsets_partition`: the producer's
        pending offsets in every group of that partition are committed or dropped. False when
        one could not be stored (the coordinator writes the marker again later)."""
        done = True
        for group_id in self.store.group_ids():
            if offsets_partition_for(group_id) != offsets_partition:
                continue
            try:
                ended = self.store.end_transaction(group_id, producer_id, commit)
            except OSError as failure:
                log.error("transaction end in group %s not stored: %s", group_id, failure)
                done = False
            else:
                if ended:
                    self.events["txn_offsets_committed" if commit else "txn_offsets_aborted"] += 1
        return done

    def _store_offsets(
        self,
        group: ClassicGroup,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        producer_id: int | None = None,
    ) -> dict[TopicPartition, ErrorCode]:
        limit = self.config.offset_metadata_max_bytes
        valid = {tp: o for tp, o in offsets.items() if len(o.metadata) <= limit}
        stored = E.none
        try:
            if producer_id is None:
                self.store.commit(group.group_id, valid)
            else:
                self.store.commit_transactional(group.group_id, producer_id, valid)
        except OSError as failure:
            log.error("offset commit of group %s not stored: %s", group.group_id, failure)
            stored = E.not_coordinator  # Kafka's KAFKA_STORAGE_ERROR, as a commit error
        else:
            self.events["offsets_committed"] += len(valid)
        return {tp: stored if tp in valid else E.offset_metadata_too_large for tp in offsets}

    def handle_fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None,
        require_stable: bool = False,
    ) -> tuple[ErrorCode, dict[TopicPartition, FetchedOffset]]:
        """Offsets regardless of the group's state; partitions=None: every committed one. With
        `require_stable`, a partition with offsets pending in a transaction is UNSTABLE."""
        if (error := self._validate_group_status(group_id, GroupApi.OFFSET_FETCH)) is not None:
            return error, {}
        group = self._groups.get(group_id)
        live = group is not None and not group.is_(GroupState.DEAD)
        committed = self.store.offsets(group_id) if live else {}
        wanted = list(committed) if partitions is None else list(partitions)
        answers = {}
        for partition in wanted:
            found = committed.get(partition)
            if require_stable and live and self.store.has_pending_offset(group_id, partition):
                answers[partition] = FetchedOffset(error=E.unstable_offset_commit)
            elif found is None:
                answers[partition] = FetchedOffset()
            else:
                answers[partition] = FetchedOffset(found.offset, found.leader_epoch, found.metadata)
        return E.none, answers

    # ---------------------------------------------------------------- admin

    def handle_list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> tuple[ErrorCode, list[ListedGroup]]:
        if (error := self.unavailable.take()) is not None:
            return error, []
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        if wanted_types and CLASSIC not in wanted_types:
            return E.none, []
        return E.none, [
            ListedGroup(group_id, group.protocol_type or "", str(group.state))
            for group_id, group in self._groups.items()
            if not wanted_states or str(group.state).lower() in wanted_states
        ]

    def handle_describe_group(self, group_id: str) -> tuple[ErrorCode, GroupDescription]:
        if (error := self._validate_group_status(group_id, GroupApi.DESCRIBE_GROUPS)) is not None:
            return error, GroupDescription("", "", "")
        return E.none, describe(self._groups.get(group_id))

    def handle_delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        errors: dict[str, ErrorCode] = {}
        for group_id in dict.fromkeys(group_ids):
            if (error := self._validate_group_status(group_id, GroupApi.DELETE_GROUPS)) is not None:
                errors[group_id] = error
                continue
            group = self._groups.get(group_id)
            if group is None or group.is_(GroupState.DEAD):
                errors[group_id] = E.group_id_not_found
            elif group.is_(GroupState.EMPTY):
                errors[group_id] = self._delete_group(group)
            else:
                errors[group_id] = E.non_empty_group
        return errors

    def _delete_group(self, group: ClassicGroup) -> ErrorCode:
        try:
            self.store.delete_group(group.group_id)
        except OSError as failure:
            log.error("group %s not deleted: %s", group.group_id, failure)
            return E.not_coordinator
        group.transition_to(GroupState.DEAD)
        self._timers.pop(group.group_id).cancel_all()
        del self._groups[group.group_id]
        return E.none

    def handle_delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        partitions = list(dict.fromkeys(partitions))
        if (error := self._validate_group_status(group_id, GroupApi.OFFSET_DELETE)) is not None:
            return error, {}
        group = self._groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return E.group_id_not_found, {}
        if group.is_(GroupState.EMPTY):
            eligible, errors = partitions, {}
        elif group.is_consumer_group:
            eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp[0])]
            errors = {
                tp: E.group_subscribed_to_topic
                for tp in partitions
                if group.is_subscribed_to_topic(tp[0])
            }
        else:
            return E.non_empty_group, {}
        try:
            self.store.delete_offsets(group_id, eligible)
        except OSError as failure:
            log.error("offsets of group %s not deleted: %s", group_id, failure)
            return E.not_coordinator, {}
        return E.none, {tp: errors.get(tp, E.none) for tp in partitions}

    # ---------------------------------------------------------------- faults

    def force_rebalance(self, group_id: str) -> str:
        """What a new member or a leader's rejoin would do: PreparingRebalance now. Returns the
        state the group is then in."""
        group = self._existing(group_id)
        self._maybe_prepare_rebalance(group, "force-rebalance fault")
        return str(group.state)

    def expire_members(self, group_id: str, member_id: str | None = None) -> list[str]:
        """Session expiry now, of one member (by member id) or of every member. A JoinGroup or
        SyncGroup the member waits in is answered UNKNOWN_MEMBER_ID."""
        group = self._existing(group_id)
        if member_id is not None and not group.has(member_id):
            raise ValueError(f"group {group_id} has no member {member_id!r}")
        doomed = [member_id] if member_id is not None else list(group.members)
        for doomed_id in doomed:
            member = group.get(doomed_id)
            group.maybe_invoke_sync_callback(member, SyncResult(E.unknown_member_id))
            self.events["members_expired"] += 1
            self._remove_member_and_update_group(group, member)
        return doomed

    def _existing(self, group_id: str) -> ClassicGroup:
        group = self._groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            raise ValueError(f"no group {group_id!r}")
        return group

    # ---------------------------------------------------------------- storage

    def _store_group(self, group: ClassicGroup, assignment: Mapping[str, bytes]) -> ErrorCode:
        """GroupMetadataManager.storeGroup, with its mapping of append errors."""
        protocol = group.protocol_name
        record = GroupRecord(
            protocol_type=group.protocol_type,
            generation_id=group.generation_id,
            protocol_name=protocol,
            leader_id=group.leader_id,
            members=tuple(
                MemberRecord(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata(protocol) if protocol else b"",
                    assignment=assignment.get(m.member_id, b""),
                )
                for m in group.all_members()
            ),
        )
        if record.encoded_size() > self.config.max_record_bytes:
            log.error("group %s's record is larger than message.max.bytes", group.group_id)
            return E.unknown_server_error  # Kafka: MESSAGE_TOO_LARGE -> UNKNOWN_SERVER_ERROR
        try:
            self.store.store_group(group.group_id, record)
        except OSError as failure:
            log.error("group %s not stored: %s", group.group_id, failure)
            return E.not_coordinator  # Kafka: KAFKA_STORAGE_ERROR -> NOT_COORDINATOR
        return E.none


def _validate_current_member(
    group: ClassicGroup, member_id: str, group_instance_id: str | None
) -> ErrorCode | None:
    """A static member must hold its instance id (else FENCED_INSTANCE_ID); any member must
    be in the group (else UNKNOWN_MEMBER_ID)."""
    if group_instance_id is not None:
        current = group.current_static_member_id(group_instance_id)
        if current is None:
            return E.unknown_member_id
        if current != member_id:
            return E.fenced_instance_id
    if not group.has(member_id):
        return E.unknown_member_id
    return None


def _validate_offset_commit(
    group: ClassicGroup,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
    *,
    is_transactional: bool = False,
) -> ErrorCode | None:
    if group.is_(GroupState.DEAD):
        return E.coordinator_not_available
    if generation_id < 0 and group.is_(GroupState.EMPTY):
        return None  # the admin client, or a consumer without group management
    if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
        error = _validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        return E.illegal_generation if generation_id != group.generation_id else None
    if not is_transactional and not group.is_(GroupState.EMPTY):
        # only members commit to a group that has members; TxnOffsetCommit before v3 names none
        return E.unknown_member_id
    return None


def _supersede_join(member: ClassicGroupMember) -> None:
    if member.awaiting_join is not None:
        callback, member.awaiting_join = member.awaiting_join, None
        callback(JoinResult(E.rebalance_in_progress, member.member_id))


def _supersede_sync(member: ClassicGroupMember) -> None:
    if member.awaiting_sync is not None:
        callback, member.awaiting_sync = member.awaiting_sync, None
        callback(SyncResult(E.rebalance_in_progress))


def _resolver(future: asyncio.Future[R]) -> Callable[[R], None]:
    """A callback that completes `future`, unless its request is gone (connection closed)."""

    def resolve(result: R) -> None:
        if not future.done():
            future.set_result(result)

    return resolve
