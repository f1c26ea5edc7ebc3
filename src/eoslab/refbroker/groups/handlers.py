"""The group APIs: FindCoordinator, the classic group protocol and TxnOffsetCommit, as Kafka
3.9's KafkaApis hands them to its GroupCoordinator (the rules are in group_coordinator.py).

Each handler turns a request of any version into the coordinator's terms and its answer back
into the response of that version, with the conversions Kafka makes for old versions: JoinGroup
v0 has no rebalance timeout (the session timeout stands in), JoinGroup v4+ requires a known
member id, SyncGroup v5+ requires the protocol type and name, LeaveGroup before v3 names one
member, OffsetFetch before v8 fetches for one group and before v2 carries group errors on each
partition, TxnOffsetCommit before v4 gets INVALID_TXN_STATE where v4 gets TRANSACTION_ABORTABLE.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from eoslab.refbroker.apis.base import NO_THROTTLE, ApiHandler, ErrorCodeHandler, RequestContext
from eoslab.refbroker.apis.topics import make_internal_topic
from eoslab.refbroker.groups.classic_group import UNKNOWN_MEMBER_ID, JoinResult, SyncResult
from eoslab.refbroker.groups.committed_offsets import (
    NO_LEADER_EPOCH,
    OffsetAndMetadata,
    TopicPartition,
)
from eoslab.refbroker.groups.group_coordinator import (
    FetchedOffset,
    JoinRequest,
    LeavingMember,
    SyncRequest,
    TxnCommit,
)
from eoslab.refbroker.internal_topics import (
    GROUP_METADATA_TOPIC,
    TRANSACTION_STATE_TOPIC,
    offsets_topic_partition,
)
from eoslab.refbroker.protocol import build, millis, nested

E = ErrorCode
GROUP_KEY, TRANSACTION_KEY, SHARE_KEY = 0, 1, 2
COORDINATOR_TOPICS = {GROUP_KEY: GROUP_METADATA_TOPIC, TRANSACTION_KEY: TRANSACTION_STATE_TOPIC}
"""The internal topic a coordinator of each key type keeps its state in."""
KEYS_VERSION = 4
"""FindCoordinator asks for several keys (coordinator_keys) from v4, for one key before."""
NO_NODE = {"node_id": -1, "host": "", "port": -1}
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
"""READ, DELETE and DESCRIBE: what Kafka reports for a group when it has no authorizer."""
DEFAULT_RETENTION = -1


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class FindCoordinatorHandler(ApiHandler):
    """This broker coordinates every group and every transactional id. As Kafka, the first
    FindCoordinator for a group makes `__consumer_offsets`, the first for a transactional id
    `__transaction_state` (a request without keys makes none); unlike Kafka, which answers
    COORDINATOR_NOT_AVAILABLE until the topic is there, it is answered once the topic is made."""

    api_key = 10
    min_version = 0
    max_version = 6

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        key_type = getattr(request, "key_type", GROUP_KEY)
        internal_topic = COORDINATOR_TOPICS.get(key_type)
        if internal_topic is not None and (
            ctx.api_version < KEYS_VERSION or request.coordinator_keys
        ):
            await make_internal_topic(ctx, internal_topic)
        return self._response(ctx, request, lambda: self._error(ctx, key_type))

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return self._response(ctx, request, lambda: error)

    @staticmethod
    def _error(ctx: RequestContext, key_type: int) -> ErrorCode:
        if key_type == GROUP_KEY:
            return ctx.broker.groups.unavailable.take() or E.none
        if key_type == TRANSACTION_KEY:
            return E.none
        if key_type == SHARE_KEY and ctx.api_version >= 6:
            return E.coordinator_not_available  # share groups (KIP-932) are not served
        return E.invalid_request

    @staticmethod
    def _response(ctx: RequestContext, request: Any, error_of: Callable[[], ErrorCode]) -> object:
        """One answer per key; `error_of` is asked once per key (a fault counts keys)."""
        config = ctx.broker.config
        node = {
            "node_id": config.node_id,
            "host": config.advertised.host,
            "port": config.advertised.port,
        }

        def answer(error: ErrorCode) -> dict[str, Any]:
            message = None if error is E.none else error.name.upper()
            return {"error_code": error, "error_message": message} | (
                node if error is E.none else NO_NODE
            )

        if ctx.api_version < KEYS_VERSION:
            return build(ctx.response_type, throttle_time=NO_THROTTLE, **answer(error_of()))
        coordinator_type = nested(ctx.response_type, "Coordinator")
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            coordinators=tuple(
                build(coordinator_type, key=key, **answer(error_of()))
                for key in request.coordinator_keys
            ),
        )


class JoinGroupHandler(ApiHandler):
    api_key = 11
    min_version = 0
    max_version = 9

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        session_timeout_ms = millis(request.session_timeout)
        rebalance = getattr(request, "rebalance_timeout", None)  # v0: the session timeout
        instance_id = getattr(request, "group_instance_id", None)
        join = JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=instance_id,
            require_known_member_id=ctx.api_version >= 4 and instance_id is None,
            support_skipping_assignment=ctx.api_version >= 9,
            client_id=ctx.client_id or "",
            client_host=ctx.client_host,
            rebalance_timeout_ms=session_timeout_ms if rebalance is None else millis(rebalance),
            session_timeout_ms=session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
            reason=getattr(request, "reason", None),
        )
        return self._response(ctx, await ctx.broker.groups.join_group(join))

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return self._response(ctx, JoinResult(error, request.member_id))

    @staticmethod
    def _response(ctx: RequestContext, result: JoinResult) -> object:
        member_type = nested(ctx.response_type, "JoinGroupResponseMember")
        protocol_name = result.protocol_name
        if protocol_name is None and ctx.api_version < 7:
            protocol_name = ""  # not nullable before v7
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=result.error,
            generation_id=result.generation_id,
            protocol_type=result.protocol_type,
            protocol_name=protocol_name,
            leader=result.leader_id,
            skip_assignment=result.skip_assignment,
            member_id=result.member_id,
            members=tuple(
                build(
                    member_type,
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    metadata=m.metadata,
                )
                for m in result.members
            ),
        )


class SyncGroupHandler(ApiHandler):
    api_key = 14
    min_version = 0
    max_version = 5

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        protocol_type = getattr(request, "protocol_type", None)
        protocol_name = getattr(request, "protocol_name", None)
        if ctx.api_version >= 5 and (protocol_type is None or protocol_name is None):
            return self.reject(request, ctx, E.inconsistent_group_protocol)  # mandatory in v5+
        sync = SyncRequest(
            group_id=request.group_id,
            generation_id=request.generation_id,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
        )
        return self._response(ctx, await ctx.broker.groups.sync_group(sync))

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return self._response(ctx, SyncResult(error))

    @staticmethod
    def _response(ctx: RequestContext, result: SyncResult) -> object:
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=result.error,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            assignment=result.assignment,
        )


class HeartbeatHandler(ErrorCodeHandler):
    api_key = 12
    min_version = 0
    max_version = 4

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        error = ctx.broker.groups.handle_heartbeat(
            request.group_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            request.generation_id,
        )
        return self.reject(request, ctx, error)


class LeaveGroupHandler(ApiHandler):
    api_key = 13
    min_version = 0
    max_version = 5

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        if ctx.api_version < 3:
            leaving = [LeavingMember(request.member_id)]
        else:
            leaving = [
                LeavingMember(m.member_id, m.group_instance_id, getattr(m, "reason", None))
                for m in request.members
            ]
        error, results = ctx.broker.groups.handle_leave_group(request.group_id, leaving)
        return self._response(ctx, error, results)

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return self._response(ctx, error, [])

    @staticmethod
    def _response(
        ctx: RequestContext, error: ErrorCode, results: list[tuple[LeavingMember, ErrorCode]]
    ) -> object:
        if ctx.api_version < 3:  # one member: its error is the response's
            member_errors = [e for _, e in results if e is not E.none]
            top = error if error is not E.none or not member_errors else member_errors[0]
            return build(ctx.response_type, throttle_time=NO_THROTTLE, error_code=top)
        member_type = nested(ctx.response_type, "MemberResponse")
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=error,
            members=tuple(
                build(
                    member_type,
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    error_code=member_error,
                )
                for m, member_error in results
            ),
        )


def _unknown_partitions(ctx: RequestContext, topics: Any) -> dict[TopicPartition, ErrorCode]:
    """Requested partitions this broker does not have (Kafka checks its metadata cache)."""
    known = ctx.broker.storage.topics()
    return {
        (topic.name, part.partition_index): E.unknown_topic_or_partition
        for topic in topics
        for part in topic.partitions
        if not 0 <= part.partition_index < known.get(topic.name, 0)
    }


def _topic_key(topic: Any) -> str:
    """The name a request topic goes by: its name, or its id where the version has no names."""
    name = getattr(topic, "name", None)
    return str(topic.topic_id) if name is None else str(name)


def _topic_identity(topic: Any) -> dict[str, Any]:
    if hasattr(topic, "name"):
        return {"name": topic.name}
    return {"topic_id": topic.topic_id}


def _topic_partitions_response(
    ctx: RequestContext,
    topics: Any,
    errors: dict[TopicPartition, ErrorCode],
    names: tuple[str, str],
) -> tuple[object, ...]:
    """topics -> partitions -> error_code, in request order (OffsetCommit, OffsetDelete).

    OffsetCommit v10 (not served: it is only refused) names topics by id, as the answer does."""
    topic_type, partition_type = (nested(ctx.response_type, name) for name in names)
    return tuple(
        build(
            topic_type,
            **_topic_identity(topic),
            partitions=tuple(
                build(
                    partition_type,
                    partition_index=part.partition_index,
                    error_code=errors.get((_topic_key(topic), part.partition_index), E.none),
                )
                for part in topic.partitions
            ),
        )
        for topic in topics
    )


class OffsetCommitHandler(ApiHandler):
    api_key = 8
    min_version = 2  # kio has no v0/v1 (v0 committed to ZooKeeper)
    max_version = 9
    entities = ("OffsetCommitResponseTopic", "OffsetCommitResponsePartition")

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        errors = _unknown_partitions(ctx, request.topics)
        now = wall_clock_ms()
        retention = getattr(request, "retention_time", None)
        retention_ms = DEFAULT_RETENTION if retention is None else millis(retention)
        expire = None if retention_ms == DEFAULT_RETENTION else now + retention_ms
        offsets = {
            (topic.name, part.partition_index): OffsetAndMetadata(
                offset=part.committed_offset,
                leader_epoch=getattr(part, "committed_leader_epoch", NO_LEADER_EPOCH),
                metadata=part.committed_metadata or "",
                commit_timestamp_ms=now,
                expire_timestamp_ms=expire,
            )
            for topic in request.topics
            for part in topic.partitions
            if (topic.name, part.partition_index) not in errors
        }
        if offsets:
            errors |= ctx.broker.groups.handle_commit_offsets(
                request.group_id,
                request.member_id,
                getattr(request, "group_instance_id", None),
                request.generation_id_or_member_epoch,
                offsets,
            )
        return self._response(ctx, request, errors)

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        errors = {
            (_topic_key(t), p.partition_index): error for t in request.topics for p in t.partitions
        }
        return self._response(ctx, request, errors)

    def _response(
        self, ctx: RequestContext, request: Any, errors: dict[TopicPartition, ErrorCode]
    ) -> object:
        topics = _topic_partitions_response(ctx, request.topics, errors, self.entities)
        return build(ctx.response_type, throttle_time=NO_THROTTLE, topics=topics)


class TxnOffsetCommitHandler(ApiHandler):
    """Offsets committed inside a transaction (send_offsets_to_transaction): visible to
    OffsetFetch once the transaction commits."""

    api_key = 28
    min_version = 0
    max_version = 4
    entities = ("TxnOffsetCommitResponseTopic", "TxnOffsetCommitResponsePartition")

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        errors = _unknown_partitions(ctx, request.topics)
        now = wall_clock_ms()
        offsets = {
            (topic.name, part.partition_index): OffsetAndMetadata(
                offset=part.committed_offset,
                leader_epoch=getattr(part, "committed_leader_epoch", NO_LEADER_EPOCH),
                metadata=part.committed_metadata or "",
                commit_timestamp_ms=now,
            )
            for topic in request.topics
            for part in topic.partitions
            if (topic.name, part.partition_index) not in errors
        }

        def verify() -> ErrorCode:
            return ctx.broker.transactions.handle_verify_partition(
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                offsets_topic_partition(request.group_id),
                abortable=ctx.api_version >= 4,
            )

        commit = TxnCommit(
            request.group_id,
            request.producer_id,
            getattr(request, "member_id", UNKNOWN_MEMBER_ID),
            getattr(request, "group_instance_id", None),
            getattr(request, "generation_id", -1),
        )
        if offsets:
            errors |= ctx.broker.groups.handle_txn_commit_offsets(commit, offsets, verify)
        return self._response(ctx, request, errors)

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        errors = {(t.name, p.partition_index): error for t in request.topics for p in t.partitions}
        return self._response(ctx, request, errors)

    def _response(
        self, ctx: RequestContext, request: Any, errors: dict[TopicPartition, ErrorCode]
    ) -> object:
        topics = _topic_partitions_response(ctx, request.topics, errors, self.entities)
        return build(ctx.response_type, throttle_time=NO_THROTTLE, topics=topics)


GroupOffsets = tuple[str, ErrorCode, dict[TopicPartition, FetchedOffset]]
"""(group id, group error, offsets) of one group in an OffsetFetch answer."""


class OffsetFetchHandler(ApiHandler):
    api_key = 9
    min_version = 1  # kio has no v0 (it read ZooKeeper)
    max_version = 9

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        coordinator = ctx.broker.groups
        answers = []
        for group_id, topics in self._groups(ctx, request):
            partitions = (
                None
                if topics is None
                else [(t.name, index) for t in topics for index in t.partition_indexes]
            )
            error, offsets = coordinator.handle_fetch_offsets(
                group_id, partitions, getattr(request, "require_stable", False)
            )
            answers.append((group_id, error, offsets))
        return self._response(ctx, answers)

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return self._response(ctx, [(g, error, {}) for g, _ in self._groups(ctx, request)])

    @staticmethod
    def _groups(ctx: RequestContext, request: Any) -> list[tuple[str, Any]]:
        """(group id, requested topics or None for all) of each group asked for."""
        if ctx.api_version >= 8:
            return [(g.group_id, g.topics) for g in request.groups]
        return [(request.group_id, request.topics)]

    @staticmethod
    def _response(ctx: RequestContext, answers: list[GroupOffsets]) -> object:
        suffix = "s" if ctx.api_version >= 8 else ""
        topic_type = nested(ctx.response_type, f"OffsetFetchResponseTopic{suffix}")
        partition_type = nested(ctx.response_type, f"OffsetFetchResponsePartition{suffix}")

        def topics(
            error: ErrorCode, offsets: dict[TopicPartition, FetchedOffset]
        ) -> tuple[object, ...]:
            by_topic: dict[str, list[tuple[int, FetchedOffset]]] = {}
            for (topic, index), fetched in offsets.items():
                by_topic.setdefault(topic, []).append((index, fetched))
            if ctx.api_version < 2 and error is not E.none:  # no top-level error before v2
                by_topic = {
                    t: [(i, FetchedOffset(error=error)) for i, _ in parts]
                    for t, parts in by_topic.items()
                }
            return tuple(
                build(
                    topic_type,
                    name=name,
                    partitions=tuple(
                        build(
                            partition_type,
                            partition_index=index,
                            committed_offset=f.offset,
                            committed_leader_epoch=f.leader_epoch,
                            metadata=f.metadata,
                            error_code=f.error,
                        )
                        for index, f in parts
                    ),
                )
                for name, parts in by_topic.items()
            )

        if ctx.api_version >= 8:
            group_type = nested(ctx.response_type, "OffsetFetchResponseGroup")
            groups: tuple[object, ...] = tuple(
                build(group_type, group_id=g, error_code=error, topics=topics(error, offsets))
                for g, error, offsets in answers
            )
            return build(ctx.response_type, throttle_time=NO_THROTTLE, groups=groups)
        ((_, error, offsets),) = answers
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=error,
            topics=topics(error, offsets),
        )


class ListGroupsHandler(ApiHandler):
    api_key = 16
    min_version = 0
    max_version = 5

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        error, groups = ctx.broker.groups.handle_list_groups(
            getattr(request, "states_filter", ()), getattr(request, "types_filter", ())
        )
        listed_type = nested(ctx.response_type, "ListedGroup")
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=error,
            groups=tuple(
                build(
                    listed_type,
                    group_id=g.group_id,
                    protocol_type=g.protocol_type,
                    group_state=g.state,
                    group_type=g.group_type,
                )
                for g in groups
            ),
        )

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return build(ctx.response_type, throttle_time=NO_THROTTLE, error_code=error, groups=())


class DescribeGroupsHandler(ApiHandler):
    api_key = 15
    min_version = 0
    max_version = 5

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        coordinator = ctx.broker.groups
        with_operations = getattr(request, "include_authorized_operations", False)
        group_type = nested(ctx.response_type, "DescribedGroup")
        member_type = nested(ctx.response_type, "DescribedGroupMember")
        described: list[object] = []
        for group_id in request.groups:
            error, description = coordinator.handle_describe_group(group_id)
            operations = (
                GROUP_OPERATIONS
                if with_operations and error is E.none
                else AUTHORIZED_OPERATIONS_OMITTED
            )
            described.append(
                build(
                    group_type,
                    error_code=error,
                    group_id=group_id,
                    group_state=description.state,
                    protocol_type=description.protocol_type,
                    protocol_data=description.protocol,
                    authorized_operations=operations,
                    members=tuple(
                        build(
                            member_type,
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            member_metadata=m.metadata,
                            member_assignment=m.assignment,
                        )
                        for m in description.members
                    ),
                )
            )
        return build(ctx.response_type, throttle_time=NO_THROTTLE, groups=tuple(described))

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        group_type = nested(ctx.response_type, "DescribedGroup")
        groups: tuple[object, ...] = tuple(
            build(
                group_type,
                error_code=error,
                group_id=g,
                group_state="",
                protocol_type="",
                protocol_data="",
                members=(),
                authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
            )
            for g in request.groups
        )
        return build(ctx.response_type, throttle_time=NO_THROTTLE, groups=groups)


class DeleteGroupsHandler(ApiHandler):
    api_key = 42
    min_version = 0
    max_version = 2

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        errors = ctx.broker.groups.handle_delete_groups(request.groups_names)
        return self._response(ctx, errors.items())

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return self._response(ctx, ((g, error) for g in dict.fromkeys(request.groups_names)))

    @staticmethod
    def _response(ctx: RequestContext, errors: Iterable[tuple[str, ErrorCode]]) -> object:
        result_type = nested(ctx.response_type, "DeletableGroupResult")
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            results=tuple(build(result_type, group_id=g, error_code=e) for g, e in errors),
        )


class OffsetDeleteHandler(ApiHandler):
    api_key = 47
    min_version = 0
    max_version = 0
    entities = ("OffsetDeleteResponseTopic", "OffsetDeleteResponsePartition")

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        unknown = _unknown_partitions(ctx, request.topics)
        wanted = [
            (t.name, p.partition_index)
            for t in request.topics
            for p in t.partitions
            if (t.name, p.partition_index) not in unknown
        ]
        error, errors = ctx.broker.groups.handle_delete_offsets(request.group_id, wanted)
        return self._response(ctx, request, error, unknown | errors)

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return self._response(ctx, request, error, {})

    def _response(
        self,
        ctx: RequestContext,
        request: Any,
        error: ErrorCode,
        errors: dict[TopicPartition, ErrorCode],
    ) -> object:
        """A group-level error answers no partition."""
        topics = request.topics if error is E.none else ()
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=error,
            topics=_topic_partitions_response(ctx, topics, errors, self.entities),
        )


GROUP_HANDLERS: tuple[type[ApiHandler], ...] = (
    FindCoordinatorHandler,
    JoinGroupHandler,
    SyncGroupHandler,
    HeartbeatHandler,
    LeaveGroupHandler,
    OffsetCommitHandler,
    TxnOffsetCommitHandler,
    OffsetFetchHandler,
    ListGroupsHandler,
    DescribeGroupsHandler,
    DeleteGroupsHandler,
    OffsetDeleteHandler,
)
