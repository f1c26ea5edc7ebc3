"""Crafted requests for the protocol-level tests (probe client + kio entities)."""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.init_producer_id.v5 import InitProducerIdRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from eoslab.probe.batches import read_batches, record_batch
from eoslab.probe.client import KafkaProtocolClient

TIMEOUT = datetime.timedelta(seconds=10)


def init_producer_id(client: KafkaProtocolClient) -> tuple[int, int]:
    response = client.request(
        InitProducerIdRequest(transactional_id=None, transaction_timeout=TIMEOUT)
    )
    return response.producer_id, response.producer_epoch


def produce_request(topic: str, partition: int, records: bytes, acks: int = -1) -> ProduceRequest:
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


def batch_of(
    pid: int, epoch: int, first_seq: int, last_seq: int, tag: str, *, first_value: int | None = None
) -> bytes:
    """Records `tag/first_seq` .. `tag/last_seq` (the seeds' `A/114~120`); a resend after an
    epoch bump keeps its values but not its sequences: pass the original `first_value`."""
    start = first_seq if first_value is None else first_value
    values = [f"{tag}/{n}".encode() for n in range(start, start + last_seq - first_seq + 1)]
    return record_batch(pid, epoch, first_seq, values)


def fetch_request(topic: str, partition: int, offset: int, max_wait_ms: int = 0) -> FetchRequest:
    return FetchRequest(
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        topics=(
            FetchTopic(
                topic=topic,
                partitions=(
                    FetchPartition(
                        partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )


def fetch_values(
    client: KafkaProtocolClient, topic: str, partition: int = 0, start: int = 0
) -> list[bytes]:
    """Every record value from `start` to the end, in offset order (bounded: 1000 fetches)."""
    values: list[bytes] = []
    offset = start
    for _ in range(1000):
        response = client.request(fetch_request(topic, partition, offset))
        data = response.responses[0].partitions[0]
        assert data.error_code is ErrorCode.none, data.error_code
        batches = [
            b for b in read_batches(data.records) if b.base_offset + b.last_offset_delta >= offset
        ]
        for batch in batches:
            values.extend(r.value for r in batch.records if r.offset >= offset)
            offset = batch.base_offset + batch.last_offset_delta + 1
        if offset >= data.high_watermark:
            return values
    raise AssertionError("partition not read to its end in 1000 fetches")


def errors_of(responses: Sequence[object]) -> list[str]:
    return [r.responses[0].partition_responses[0].error_code.name.upper() for r in responses]  # type: ignore[attr-defined]
