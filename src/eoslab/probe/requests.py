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
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.static.primitive import i32, i64

TIMEOUT = datetime.timedelta(seconds=10)
ALL_ISR = -1
"""acks=-1: a Produce request is answered once every in-sync replica has the batch."""
HIGH_WATERMARK = -1
"""DeleteRecords' offset -1: delete everything below the high watermark."""
FETCH_MAX_BYTES = 1 << 20


def init_producer_id_request() -> InitProducerIdRequest:
    """An idempotent (non-transactional) producer's request for a producer id."""
    return InitProducerIdRequest(transactional_id=None, transaction_timeout=TIMEOUT)


def metadata_request(topic: str) -> MetadataRequest:
    return MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=topic),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def produce_request(
    topic: str, partition: int, records: bytes, acks: int = ALL_ISR
) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=TIMEOUT,
        topic_data=(
            TopicProduceData(
                name=topic, partition_data=(PartitionProduceData(index=partition, records=records),)
            ),
        ),
    )


def fetch_request(topic: str, partition: int, offset: int, max_wait_ms: int = 0) -> FetchRequest:
    return FetchRequest(
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        topics=(
            FetchTopic(
                topic=topic,
                partitions=(
                    FetchPartition(
                        partition=partition,
                        fetch_offset=offset,
                        partition_max_bytes=FETCH_MAX_BYTES,
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
        topics=(DeleteRecordsTopic(name=topic, partitions=partitions),), timeout=TIMEOUT
    )


def describe_producers_request(topic: str, partition: int) -> DescribeProducersRequest:
    return DescribeProducersRequest(
        topics=(TopicRequest(name=topic, partition_indexes=(i32(partition),)),)
    )
