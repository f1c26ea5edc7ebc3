"""Each served API at the versions real clients pick, through the probe client."""

from __future__ import annotations

import datetime
import time
import uuid

from crafted import (
    TIMEOUT,
    batch_of,
    errors_of,
    fetch_request,
    fetch_values,
    init_producer_id,
    produce_request,
)
from kio.schema.api_versions.v0 import ApiVersionsRequest as ApiVersionsRequestV0
from kio.schema.create_topics.v2.request import CreatableTopic, CreateTopicsRequest
from kio.schema.delete_records.v2.request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.describe_cluster.v1 import DescribeClusterRequest
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v4.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.init_producer_id.v5 import InitProducerIdRequest
from kio.schema.list_offsets.v8.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.metadata.v0 import MetadataRequest as MetadataRequestV0
from kio.schema.metadata.v1 import MetadataRequest as MetadataRequestV1
from kio.schema.metadata.v12 import MetadataRequest
from kio.schema.metadata.v12.request import MetadataRequestTopic
from kio.schema.produce.v3.request import PartitionProduceData, ProduceRequest, TopicProduceData
from refbroker_process import RunningBroker, StartBroker

from eoslab.probe.batches import read_batches


def test_api_versions_v0_lists_every_served_api(refbroker: RunningBroker) -> None:
    with refbroker.client() as client:
        response = client.request(ApiVersionsRequestV0())
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert response.error_code is ErrorCode.none
    assert ranges == {
        0: (3, 11), 1: (4, 12), 2: (1, 8), 3: (0, 12), 18: (0, 3), 19: (2, 7),
        20: (1, 6), 21: (0, 2), 22: (0, 5), 60: (0, 1), 61: (0, 0),
        # the group APIs: Kafka 3.9.2's ranges, but from v2 (OffsetCommit) and v1 (OffsetFetch),
        # the oldest versions kio has
        8: (2, 9), 9: (1, 9), 10: (0, 6), 11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5),
        15: (0, 5), 16: (0, 5), 42: (0, 2), 47: (0, 0),
        # the transaction APIs: Kafka 3.9.2's client ranges (AddPartitionsToTxn v4-5 are
        # broker to broker)
        24: (0, 3), 25: (0, 4), 26: (0, 4), 28: (0, 4), 65: (0, 0), 66: (0, 1),
    }  # fmt: skip


def test_metadata_advertises_the_configured_address_at_old_and_new_versions(
    start_refbroker: StartBroker,
) -> None:
    broker = start_refbroker("--advertised", "127.0.0.1:9192", "--node-id", "7")
    broker.create_topic("meta", 3)
    with broker.client() as client:
        responses = [
            client.request(MetadataRequestV0(topics=())),
            client.request(MetadataRequestV1(topics=None)),
            client.request(MetadataRequest(topics=None, include_topic_authorized_operations=False)),
        ]
    for response in responses:
        (node,) = response.brokers
        assert (node.node_id, node.host, node.port) == (7, "127.0.0.1", 9192)
        (topic,) = response.topics
        assert topic.name == "meta"
        assert [(p.partition_index, p.leader_id) for p in topic.partitions] == [
            (0, 7), (1, 7), (2, 7),
        ]  # fmt: skip


def test_every_topic_has_a_topic_id_that_survives_a_restart(
    start_refbroker: StartBroker,
) -> None:
    """KIP-516, as Kafka 3.9 answers Metadata v10+ (franz-go 1.21 needs it: issue 19)."""
    broker = start_refbroker()
    broker.create_topic("a", 2)
    broker.create_topic("b", 1)
    request = MetadataRequest(topics=None, include_topic_authorized_operations=False)

    def topic_ids() -> dict[str, uuid.UUID]:
        with broker.client() as client:
            return {t.name: t.topic_id for t in client.request(request).topics}

    before = topic_ids()
    assert uuid.UUID(int=0) not in before.values()
    assert len(set(before.values())) == 2
    broker.kill()
    broker.start()
    assert topic_ids() == before


def test_unknown_topics_are_reported_unless_auto_creation_is_on(
    start_refbroker: StartBroker,
) -> None:
    wanted = (MetadataRequestTopic(topic_id=None, name="fresh"),)
    request = MetadataRequest(topics=wanted, include_topic_authorized_operations=False)
    plain, creating = start_refbroker(), start_refbroker("--auto-create-topics")
    with plain.client() as client:
        (unknown,) = client.request(request).topics
    with creating.client() as client:
        (created,) = client.request(request).topics
        appended = client.request(produce_request("other", 0, batch_of(-1, -1, -1, -1, "v")))
    assert unknown.error_code is ErrorCode.unknown_topic_or_partition
    assert created.error_code is ErrorCode.none
    assert len(created.partitions) == 1
    assert errors_of([appended]) == ["NONE"]


def test_create_topics_validates_like_a_single_kafka_broker(refbroker: RunningBroker) -> None:
    def topic(name: str, partitions: int = 1, replication: int = 1) -> CreatableTopic:
        return CreatableTopic(
            name=name,
            num_partitions=partitions,
            replication_factor=replication,
            assignments=(),
            configs=(),
        )

    topics = (
        topic("ok", 2),
        topic("ok"),
        topic("../escape"),
        topic("rf3", replication=3),
        topic("zero", partitions=0),
    )
    with refbroker.client() as client:
        results = client.request(CreateTopicsRequest(topics=topics, timeout=TIMEOUT)).topics
    assert [r.error_code for r in results] == [
        ErrorCode.none,
        ErrorCode.topic_already_exists,
        ErrorCode.invalid_topic_exception,
        ErrorCode.invalid_replication_factor,
        ErrorCode.invalid_partitions,
    ]


def test_delete_topics_by_name_and_by_unknown_id(refbroker: RunningBroker) -> None:
    refbroker.create_topic("doomed", 1)
    states = (
        DeleteTopicState(name="doomed", topic_id=uuid.UUID(int=0)),
        DeleteTopicState(name="never", topic_id=uuid.UUID(int=0)),
        DeleteTopicState(name=None, topic_id=uuid.uuid4()),
    )
    with refbroker.client() as client:
        results = client.request(DeleteTopicsRequest(topics=states, timeout=TIMEOUT)).responses
        metadata = client.request(
            MetadataRequest(topics=None, include_topic_authorized_operations=False)
        )
    assert [r.error_code for r in results] == [
        ErrorCode.none,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.unknown_topic_id,
    ]
    assert metadata.topics == ()


def test_init_producer_id_without_a_transactional_id_hands_out_a_fresh_id_at_epoch_0(
    refbroker: RunningBroker,
) -> None:
    with refbroker.client() as client:
        first, epoch = init_producer_id(client)
        again = client.request(
            InitProducerIdRequest(
                transactional_id=None,
                transaction_timeout=TIMEOUT,
                producer_id=first,
                producer_epoch=epoch,
            )
        )
        half = client.request(
            InitProducerIdRequest(transactional_id=None, transaction_timeout=TIMEOUT, producer_id=7)
        )
    assert epoch == 0
    assert (again.error_code, again.producer_epoch) == (ErrorCode.none, 0)
    assert again.producer_id == first + 1
    # KIP-360: a producer id without an epoch (or the reverse) is an invalid request
    assert (half.error_code, half.producer_id) == (ErrorCode.invalid_request, -1)


def test_produce_v3_and_fetch_v4_round_trip_and_acks_0_is_not_answered(
    refbroker: RunningBroker,
) -> None:
    refbroker.create_topic("old", 1)
    with refbroker.client() as client:
        pid, epoch = init_producer_id(client)

        def v3(records: bytes, acks: int) -> ProduceRequest:
            data = TopicProduceData(
                name="old", partition_data=(PartitionProduceData(index=0, records=records),)
            )
            return ProduceRequest(
                transactional_id=None, acks=acks, timeout=TIMEOUT, topic_data=(data,)
            )

        client.send(v3(batch_of(pid, epoch, 0, 1, "v"), acks=0))  # no response expected
        answered = client.request(v3(batch_of(pid, epoch, 2, 2, "v"), acks=1))
        fetched = client.request(
            FetchRequest(
                max_wait=datetime.timedelta(0),
                min_bytes=1,
                topics=(
                    FetchTopic(
                        topic="old",
                        partitions=(
                            FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=4096),
                        ),
                    ),
                ),
            )
        )
    assert errors_of([answered]) == ["NONE"]
    assert answered.responses[0].partition_responses[0].base_offset == 2
    data = fetched.responses[0].partitions[0]
    assert data.high_watermark == 3
    assert [r.value for b in read_batches(data.records) for r in b.records] == [
        b"v/0",
        b"v/1",
        b"v/2",
    ]


def test_long_poll_fetch_is_woken_by_an_append(refbroker: RunningBroker) -> None:
    refbroker.create_topic("poll", 1)
    with refbroker.client() as consumer, refbroker.client() as producer:
        consumer.send(fetch_request("poll", 0, 0, max_wait_ms=20_000))
        pid, epoch = init_producer_id(producer)
        producer.request(produce_request("poll", 0, batch_of(pid, epoch, 0, 0, "v")))
        woken = consumer.receive()  # before max_wait only if the append woke it
    assert woken.responses[0].partitions[0].high_watermark == 1
    (batch,) = read_batches(woken.responses[0].partitions[0].records)
    assert batch.records[0].value == b"v/0"


def test_fetch_beyond_the_log_end_is_offset_out_of_range(refbroker: RunningBroker) -> None:
    refbroker.create_topic("range", 1)
    with refbroker.client() as client:
        response = client.request(fetch_request("range", 0, 5))
        unknown = client.request(fetch_request("nope", 0, 0))
    assert response.responses[0].partitions[0].error_code is ErrorCode.offset_out_of_range
    assert unknown.responses[0].partitions[0].error_code is ErrorCode.unknown_topic_or_partition


def test_list_offsets_delete_records_and_describe_producers(refbroker: RunningBroker) -> None:
    refbroker.create_topic("bounds", 1)
    with refbroker.client() as client:
        pid, epoch = init_producer_id(client)
        for first in (0, 3):
            client.request(
                produce_request("bounds", 0, batch_of(pid, epoch, first, first + 2, "v"))
            )

        def offset_at(timestamp: int) -> int:
            partition = ListOffsetsPartition(partition_index=0, timestamp=timestamp)
            topic = ListOffsetsTopic(name="bounds", partitions=(partition,))
            response = client.request(
                ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(topic,))
            )
            return response.topics[0].partitions[0].offset

        before = (offset_at(-2), offset_at(-1))
        deleted = client.request(
            DeleteRecordsRequest(
                topics=(
                    DeleteRecordsTopic(
                        name="bounds",
                        partitions=(DeleteRecordsPartition(partition_index=0, offset=3),),
                    ),
                ),
                timeout=TIMEOUT,
            )
        )
        after = (offset_at(-2), offset_at(-1))
        producers = client.request(
            DescribeProducersRequest(topics=(TopicRequest(name="bounds", partition_indexes=(0,)),))
        )
        values = fetch_values(client, "bounds", start=3)
    assert before == (0, 6)
    assert deleted.topics[0].partitions[0].low_watermark == 3
    assert after == (3, 6)
    assert values == [b"v/3", b"v/4", b"v/5"]
    (state,) = producers.topics[0].partitions[0].active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence) == (pid, epoch, 5)


def test_describe_cluster_names_this_broker(start_refbroker: StartBroker) -> None:
    broker = start_refbroker("--advertised", "127.0.0.1:9192", "--node-id", "3")
    with broker.client() as client:
        response = client.request(
            DescribeClusterRequest(include_cluster_authorized_operations=False)
        )
    assert response.error_code is ErrorCode.none
    assert response.controller_id == 3
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(3, "127.0.0.1", 9192)]


def test_idle_producers_expire_on_the_periodic_check_without_appending_again(
    start_refbroker: StartBroker,
) -> None:
    """Found while sizing the soak's 100,000 producer ids: expiry ran only when the same
    producer appended again, so producers that went away stayed forever. Kafka's
    PeriodicProducerExpirationCheck (producer.id.expiration.check.interval.ms) drops them."""
    broker = start_refbroker(
        "--producer-id-expiration-ms", "1500",
        "--producer-id-expiration-check-interval-ms", "200",
    )  # fmt: skip
    broker.create_topic("idle", 2)
    describe = DescribeProducersRequest(
        topics=(TopicRequest(name="idle", partition_indexes=(0, 1)),)
    )
    with broker.client() as client:
        idle = [init_producer_id(client) for _ in range(3)]
        for n, (pid, epoch) in enumerate(idle):
            client.request(produce_request("idle", n % 2, batch_of(pid, epoch, 0, 1, "i")))
        before = client.request(describe)
        live, live_epoch = init_producer_id(client)
        deadline = time.monotonic() + 15
        sequence = 0
        while time.monotonic() < deadline:  # the live producer keeps appending every 200 ms
            client.request(
                produce_request("idle", 0, batch_of(live, live_epoch, sequence, sequence, "l"))
            )
            sequence += 1
            after = client.request(describe)
            left = {
                p.producer_id for part in after.topics[0].partitions for p in part.active_producers
            }
            if left == {live}:
                break
            time.sleep(0.2)
    assert {
        p.producer_id for part in before.topics[0].partitions for p in part.active_producers
    } == {pid for pid, _ in idle}
    assert left == {live}, f"idle producers still held after 15 s: {left - {live}}"
    assert "expired" in broker.log_file.read_text()
