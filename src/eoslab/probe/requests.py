"""The kio requests a probe sends, at the versions both Kafka 3.9 and the reference broker speak.

The group requests are those of the classic protocol at the versions the Java client 3.9 uses
(JoinGroup v9, SyncGroup v5, Heartbeat v4, LeaveGroup v5, OffsetCommit v8, OffsetFetch v8,
FindCoordinator v4, DescribeGroups v5), with the consumer protocol type and a ConsumerProtocol
subscription as member metadata, so Kafka treats the probe like any consumer.

The transaction requests are at versions both targets serve and some client sends:
InitProducerId v5, AddPartitionsToTxn v3, AddOffsetsToTxn v3, EndTxn v3, TxnOffsetCommit v3
(librdkafka's; the Java client 3.9 sends v4, where TRANSACTION_ABORTABLE replaces
INVALID_TXN_STATE), ListOffsets v7 with an isolation level, DescribeTransactions v0.
"""

from __future__ import annotations

import datetime
import struct

from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.add_partitions_to_txn.v3.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from kio.schema.delete_records.v2.request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.init_producer_id.v5 import InitProducerIdRequest
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.leave_group.v5.request import LeaveGroupRequest, MemberIdentity
from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
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
from kio.schema.txn_offset_commit.v3.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kio.schema.types import BrokerId, GroupId, ProducerId, TopicName, TransactionalId
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
TRANSACTION_KEY = 1
LATEST = -1
"""ListOffsets' timestamp for the latest offset (the last stable one under read_committed)."""
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def init_producer_id_request() -> InitProducerIdRequest:
    """An idempotent (non-transactional) producer's request for a producer id."""
    return InitProducerIdRequest(transactional_id=None, transaction_timeout=TIMEOUT)


def produce_request(
    topic: str,
    partition: int,
    records: bytes,
    acks: int = ALL_ISR,
    transactional_id: str | None = None,
) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None if transactional_id is None else TransactionalId(transactional_id),
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


def fetch_request(
    topic: str,
    partition: int,
    offset: int,
    max_wait_ms: int = 0,
    isolation_level: int = READ_UNCOMMITTED,
) -> FetchRequest:
    return FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=max_wait_ms)),
        min_bytes=i32(1),
        isolation_level=i8(isolation_level),
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


def offset_fetch_request(
    group: str, topic: str, partitions: tuple[int, ...], *, require_stable: bool = False
) -> OffsetFetchRequest:
    wanted = OffsetFetchRequestTopics(
        name=TopicName(topic), partition_indexes=tuple(map(i32, partitions))
    )
    return OffsetFetchRequest(
        groups=(OffsetFetchRequestGroup(group_id=GroupId(group), topics=(wanted,)),),
        require_stable=require_stable,
    )


def describe_groups_request(*groups: str) -> DescribeGroupsRequest:
    return DescribeGroupsRequest(
        groups=tuple(map(GroupId, groups)), include_authorized_operations=False
    )


def find_transaction_coordinator_request(transactional_id: str) -> FindCoordinatorRequest:
    return FindCoordinatorRequest(
        key_type=i8(TRANSACTION_KEY), coordinator_keys=(transactional_id,)
    )


def init_transactional_producer_request(
    transactional_id: str, timeout_ms: int, producer_id: int = -1, epoch: int = -1
) -> InitProducerIdRequest:
    """InitProducerId for a transactional id; KIP-360's producer id and epoch when given."""
    return InitProducerIdRequest(
        transactional_id=TransactionalId(transactional_id),
        transaction_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=timeout_ms)),
        producer_id=ProducerId(producer_id),
        producer_epoch=i16(epoch),
    )


def add_partitions_to_txn_request(
    transactional_id: str, producer_id: int, epoch: int, topic: str, partitions: tuple[int, ...]
) -> AddPartitionsToTxnRequest:
    return AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TransactionalId(transactional_id),
        v3_and_below_producer_id=ProducerId(producer_id),
        v3_and_below_producer_epoch=i16(epoch),
        v3_and_below_topics=(
            AddPartitionsToTxnTopic(name=TopicName(topic), partitions=tuple(map(i32, partitions))),
        ),
    )


def add_offsets_to_txn_request(
    transactional_id: str, producer_id: int, epoch: int, group: str
) -> AddOffsetsToTxnRequest:
    return AddOffsetsToTxnRequest(
        transactional_id=TransactionalId(transactional_id),
        producer_id=ProducerId(producer_id),
        producer_epoch=i16(epoch),
        group_id=GroupId(group),
    )


def end_txn_request(
    transactional_id: str, producer_id: int, epoch: int, *, commit: bool
) -> EndTxnRequest:
    return EndTxnRequest(
        transactional_id=TransactionalId(transactional_id),
        producer_id=ProducerId(producer_id),
        producer_epoch=i16(epoch),
        committed=commit,
    )


def txn_offset_commit_request(
    transactional_id: str,
    group: str,
    producer_id: int,
    epoch: int,
    *,
    topic: str,
    partition: int,
    offset: int,
) -> TxnOffsetCommitRequest:
    """Outside group management (generation -1, no member), as a producer with a group id."""
    committed = TxnOffsetCommitRequestPartition(
        partition_index=i32(partition),
        committed_offset=i64(offset),
        committed_leader_epoch=i32(-1),
        committed_metadata="",
    )
    return TxnOffsetCommitRequest(
        transactional_id=TransactionalId(transactional_id),
        group_id=GroupId(group),
        producer_id=ProducerId(producer_id),
        producer_epoch=i16(epoch),
        group_instance_id=None,
        topics=(TxnOffsetCommitRequestTopic(name=TopicName(topic), partitions=(committed,)),),
    )


def list_offsets_request(
    topic: str, partition: int, isolation_level: int, timestamp: int = LATEST
) -> ListOffsetsRequest:
    wanted = ListOffsetsPartition(
        partition_index=i32(partition), current_leader_epoch=i32(-1), timestamp=i64(timestamp)
    )
    return ListOffsetsRequest(
        replica_id=BrokerId(-1),
        isolation_level=i8(isolation_level),
        topics=(ListOffsetsTopic(name=TopicName(topic), partitions=(wanted,)),),
    )


def describe_transactions_request(*transactional_ids: str) -> DescribeTransactionsRequest:
    return DescribeTransactionsRequest(
        transactional_ids=tuple(map(TransactionalId, transactional_ids))
    )
