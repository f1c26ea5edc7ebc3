"""The kio requests a probe sends, at the versions both Kafka 3.9 and the reference broker speak."""

from __future__ import annotations

import datetime

from kio.schema.delete_records.v2.request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.init_producer_id.v5 import InitProducerIdRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta, i64

TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=10))
ALL_ISR = -1
"""acks=-1: a Produce request is answered once every in-sync replica has the batch."""
HIGH_WATERMARK = -1
"""DeleteRecords' offset -1: delete everything below the high watermark."""
FETCH_MAX_BYTES = 1 << 20


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
