"""The kio requests a probe sends, at the versions both Kafka 3.9 and the reference broker speak.

The group requests are those of the classic protocol at the versions the Java client 3.9 uses
(JoinGroup v9, SyncGroup v5, Heartbeat v4, LeaveGroup v5, OffsetCommit v8, OffsetFetch v8,
FindCoordinator v4, DescribeGroups v5), with the consumer protocol type and a ConsumerProtocol
subscription as member metadata, so Kafka treats the probe like any consumer.
"""

from __future__ import annotations

import datetime
import struct

from kio.schema.delete_records.v2.request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.init_producer_id.v5 import InitProducerIdRequest
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.leave_group.v5.request import LeaveGroupRequest, MemberIdentity
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v8.request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64

TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=10))
ALL_ISR = -1
"""acks=-1: a Produce request is answered once every in-sync replica has the batch."""
HIGH_WATERMARK = -1
"""DeleteRecords' offset -1: delete everything below the high watermark."""
FETCH_MAX_BYTES = 1 << 20
CONSUMER = "consumer"
"""The protocol type of consumer groups; the assignor's name is the protocol name."""
RANGE = "range"
GROUP_KEY = 0


def init_producer_id_request() -> InitProducerIdRequest:
    """An idempotent (non-transactional) producer's request for a producer id."""
    return InitProducerIdRequest(transactional_id=None, transaction_timeout=TIMEOUT)


def produce_request(
    topic: str, partition: int, records: bytes, acks: int = ALL_ISR
) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None,
        acks=i16(acks),
        timeout=TIMEOUT,
        topic_data=(
            TopicProduceData(
                name=TopicName(topic),
                partition_data=(
                    PartitionProduceData(index=i32(partition), records=Records(records)),
                ),
            ),
        ),
    )


def fetch_request(topic: str, partition: int, offset: int, max_wait_ms: int = 0) -> FetchRequest:
    return FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=max_wait_ms)),
        min_bytes=i32(1),
        topics=(
            FetchTopic(
                topic=TopicName(topic),
                partitions=(
                    FetchPartition(
                        partition=i32(partition),
                        fetch_offset=i64(offset),
                        partition_max_bytes=i32(FETCH_MAX_BYTES),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )


def delete_records_request(
    topic: str, partition: int, before: int = HIGH_WATERMARK
) -> DeleteRecordsRequest:
    partitions = (DeleteRecordsPartition(partition_index=i32(partition), offset=i64(before)),)
    return DeleteRecordsRequest(
        topics=(DeleteRecordsTopic(name=TopicName(topic), partitions=partitions),),
        timeout=TIMEOUT,
    )


def describe_producers_request(topic: str, partition: int) -> DescribeProducersRequest:
    return DescribeProducersRequest(
        topics=(TopicRequest(name=TopicName(topic), partition_indexes=(i32(partition),)),)
    )


def consumer_subscription(*topics: str) -> bytes:
    """ConsumerProtocol subscription v0: version int16, topics as an array of strings, null
    user data (what a consumer sends as JoinGroup member metadata)."""
    encoded = b"".join(struct.pack(">h", len(t.encode())) + t.encode() for t in topics)
    return struct.pack(">hi", 0, len(topics)) + encoded + struct.pack(">i", -1)


def find_coordinator_request(group: str) -> FindCoordinatorRequest:
    return FindCoordinatorRequest(key_type=i8(GROUP_KEY), coordinator_keys=(group,))


def join_group_request(
    group: str,
    member_id: str,
    topic: str,
    *,
    session_ms: int = 10_000,
    rebalance_ms: int = 30_000,
    group_instance_id: str | None = None,
    metadata: bytes | None = None,
) -> JoinGroupRequest:
    protocol = JoinGroupRequestProtocol(
        name=RANGE, metadata=consumer_subscription(topic) if metadata is None else metadata
    )
    return JoinGroupRequest(
        group_id=GroupId(group),
        session_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=session_ms)),
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=rebalance_ms)),
        member_id=member_id,
        group_instance_id=group_instance_id,
        protocol_type=CONSUMER,
        protocols=(protocol,),
        reason=None,
    )


def sync_group_request(
    group: str, generation: int, member_id: str, assignments: dict[str, bytes]
) -> SyncGroupRequest:
    return SyncGroupRequest(
        group_id=GroupId(group),
        generation_id=i32(generation),
        member_id=member_id,
        protocol_type=CONSUMER,
        protocol_name=RANGE,
        assignments=tuple(
            SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in assignments.items()
        ),
    )


def heartbeat_request(group: str, generation: int, member_id: str) -> HeartbeatRequest:
    return HeartbeatRequest(
        group_id=GroupId(group), generation_id=i32(generation), member_id=member_id
    )


def leave_group_request(group: str, member_id: str) -> LeaveGroupRequest:
    return LeaveGroupRequest(
        group_id=GroupId(group), members=(MemberIdentity(member_id=member_id),)
    )


def offset_commit_request(
    group: str,
    *,
    generation: int,
    member_id: str,
    topic: str,
    partition: int,
    offset: int,
    metadata: str | None = "",
) -> OffsetCommitRequest:
    committed = OffsetCommitRequestPartition(
        partition_index=i32(partition),
        committed_offset=i64(offset),
        committed_metadata=metadata,
    )
    return OffsetCommitRequest(
        group_id=GroupId(group),
        generation_id_or_member_epoch=i32(generation),
        member_id=member_id,
        topics=(OffsetCommitRequestTopic(name=TopicName(topic), partitions=(committed,)),),
    )


def offset_fetch_request(group: str, topic: str, partitions: tuple[int, ...]) -> OffsetFetchRequest:
    wanted = OffsetFetchRequestTopics(
        name=TopicName(topic), partition_indexes=tuple(map(i32, partitions))
    )
    return OffsetFetchRequest(
        groups=(OffsetFetchRequestGroup(group_id=GroupId(group), topics=(wanted,)),)
    )


def describe_groups_request(*groups: str) -> DescribeGroupsRequest:
    return DescribeGroupsRequest(
        groups=tuple(map(GroupId, groups)), include_authorized_operations=False
    )
