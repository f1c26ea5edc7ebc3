"""Kafka's internal topics on the reference broker (issue 29): made by the first FindCoordinator
of their kind, listed by Metadata with is_internal and the broker's own partition counts, kept
across a kill -9, refused to clients' writes, and deletable, each as the lab's Kafka 3.9 answered
it. With real clients on both brokers: test_kafka_parity_lab.py."""

from __future__ import annotations

import uuid
from pathlib import Path

from crafted import TIMEOUT, errors_of, init_producer_id, produce_request
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.metadata.v12 import MetadataRequest
from kio.schema.metadata.v12.request import MetadataRequestTopic
from refbroker_process import RunningBroker, StartBroker

from eoslab.probe.batches import record_batch
from eoslab.probe.client import KafkaProtocolClient
from eoslab.probe.requests import (
    GROUP_KEY,
    READ_UNCOMMITTED,
    add_partitions_to_txn_request,
    delete_records_request,
    find_coordinator_request,
    find_transaction_coordinator_request,
    init_transactional_producer_request,
    list_offsets_request,
    offset_commit_request,
    offset_fetch_request,
)
from eoslab.refbroker.internal_topics import (
    GROUP_METADATA_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    TRANSACTION_STATE_PARTITIONS,
    TRANSACTION_STATE_TOPIC,
)
from eoslab.refbroker.log_manager import INTERNAL_TOPICS, LogManager, StorageConfig

EVERY_TOPIC = MetadataRequest(topics=None, include_topic_authorized_operations=False)
Listing = dict[str, tuple[bool, int, uuid.UUID]]


def listing(client: KafkaProtocolClient) -> Listing:
    """Metadata for every topic: is_internal, partitions and topic id by name."""
    return {
        t.name: (t.is_internal, len(t.partitions), t.topic_id)
        for t in client.request(EVERY_TOPIC).topics
    }


def create_topic_request(name: str, partitions: int) -> CreateTopicsRequest:
    topic = CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=(), configs=()
    )
    return CreateTopicsRequest(topics=(topic,), timeout=TIMEOUT)


def flags(listed: Listing) -> dict[str, tuple[bool, int]]:
    return {name: (internal, partitions) for name, (internal, partitions, _) in listed.items()}


def test_the_first_find_coordinator_of_each_kind_makes_its_internal_topic(
    start_refbroker: StartBroker,
) -> None:
    broker = start_refbroker()
    broker.create_topic("eos-t", 1)
    by_name = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=TRANSACTION_STATE_TOPIC),),
        include_topic_authorized_operations=False,
    )
    with broker.client() as client:
        init_producer_id(client)  # an idempotent producer's: makes no topic on Kafka either
        client.request(FindCoordinatorRequest(key_type=GROUP_KEY, coordinator_keys=()))
        before = flags(listing(client))
        (unknown,) = client.request(by_name).topics
        found = client.request(find_coordinator_request("g")).coordinators
        with_group = flags(listing(client))
        client.request(find_transaction_coordinator_request("tx"))
        with_both = listing(client)
    assert before == {"eos-t": (False, 1)}
    # Kafka flags an internal topic by its name, also on the error for one not made yet
    assert (unknown.error_code, unknown.is_internal) == (ErrorCode.unknown_topic_or_partition, True)
    assert [c.error_code for c in found] == [ErrorCode.none]
    assert with_group == {
        "eos-t": (False, 1),
        GROUP_METADATA_TOPIC: (True, OFFSETS_TOPIC_PARTITIONS),
    }
    assert flags(with_both) == {
        **with_group,
        TRANSACTION_STATE_TOPIC: (True, TRANSACTION_STATE_PARTITIONS),
    }
    broker.kill()
    broker.start()
    with broker.client() as client:
        assert listing(client) == with_both  # topic ids too


def test_clients_may_not_write_the_internal_topics(refbroker: RunningBroker) -> None:
    refbroker.create_topic("eos-t", 1)
    batch = record_batch(-1, -1, -1, [b"v"])
    with refbroker.client() as client:
        not_yet = errors_of([client.request(produce_request(GROUP_METADATA_TOPIC, 0, batch))])
        client.request(find_coordinator_request("g"))
        client.request(find_transaction_coordinator_request("tx"))
        produced = errors_of(
            [
                client.request(produce_request(topic, 0, batch))
                for topic in (GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC, "eos-t")
            ]
        )
        deleted = [
            client.request(delete_records_request(topic, 0)).topics[0].partitions[0].error_code
            for topic in (GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC, "eos-t")
        ]
        txn = client.request(init_transactional_producer_request("tx", 10_000))
        added = client.request(
            add_partitions_to_txn_request(
                "tx", txn.producer_id, txn.producer_epoch, TRANSACTION_STATE_TOPIC, (0,)
            )
        )
        created = client.request(create_topic_request(GROUP_METADATA_TOPIC, 1)).topics
        end = client.request(list_offsets_request(GROUP_METADATA_TOPIC, 7, READ_UNCOMMITTED))
    # Kafka looks for the partition first: one not made yet is unknown
    assert not_yet == ["UNKNOWN_TOPIC_OR_PARTITION"]
    assert produced == ["INVALID_TOPIC_EXCEPTION", "INVALID_TOPIC_EXCEPTION", "NONE"]
    assert deleted == [ErrorCode.invalid_topic_exception] * 2 + [ErrorCode.none]
    (added_topic,) = added.results_by_topic_v3_and_below
    assert [p.partition_error_code for p in added_topic.results_by_partition] == [
        ErrorCode.topic_authorization_failed
    ]
    assert [(t.error_code, t.error_message) for t in created] == [
        (ErrorCode.topic_already_exists, f"Topic '{GROUP_METADATA_TOPIC}' already exists.")
    ]
    # readable, and empty: the coordinators keep their state in files of their own
    (partition,) = end.topics[0].partitions
    assert (partition.error_code, partition.offset) == (ErrorCode.none, 0)


def test_an_internal_topic_is_deleted_and_made_again_as_on_kafka(refbroker: RunningBroker) -> None:
    refbroker.create_topic("eos-t", 1)
    deletion = DeleteTopicsRequest(
        topics=(
            DeleteTopicState(name=GROUP_METADATA_TOPIC, topic_id=uuid.UUID(int=0)),
            DeleteTopicState(name=TRANSACTION_STATE_TOPIC, topic_id=uuid.UUID(int=0)),
        ),
        timeout=TIMEOUT,
    )
    made_by_hand = create_topic_request(TRANSACTION_STATE_TOPIC, 2)
    commit = offset_commit_request(
        "g", generation=-1, member_id="", topic="eos-t", partition=0, offset=5
    )
    with refbroker.client() as client:
        client.request(find_coordinator_request("g"))
        client.request(find_transaction_coordinator_request("tx"))
        client.request(commit)
        first_id = listing(client)[GROUP_METADATA_TOPIC][2]
        deleted = client.request(deletion).responses
        after_deletion = flags(listing(client))
        fetched = client.request(offset_fetch_request("g", "eos-t", (0,)))
        created = client.request(made_by_hand).topics
        client.request(find_coordinator_request("g"))
        client.request(find_transaction_coordinator_request("tx"))
        again = listing(client)
    assert [r.error_code for r in deleted] == [ErrorCode.none, ErrorCode.none]
    assert after_deletion == {"eos-t": (False, 1)}
    # the difference from Kafka: the group's offsets are not in the deleted topic, so they stay
    (group,) = fetched.groups
    assert group.topics[0].partitions[0].committed_offset == 5
    # as Kafka 3.9: CreateTopics makes a missing internal topic with the partitions it asks for,
    # and FindCoordinator leaves one that exists as it is
    assert [t.error_code for t in created] == [ErrorCode.none]
    assert flags(again) == {
        "eos-t": (False, 1),
        GROUP_METADATA_TOPIC: (True, OFFSETS_TOPIC_PARTITIONS),
        TRANSACTION_STATE_TOPIC: (True, 2),
    }
    assert again[GROUP_METADATA_TOPIC][2] != first_id


def test_internal_topics_have_no_log_and_an_unusable_record_of_them_is_ignored(
    tmp_path: Path,
) -> None:
    logs = LogManager(StorageConfig(tmp_path))
    logs.create_topic("t", 1)
    logs.create_topic(GROUP_METADATA_TOPIC, OFFSETS_TOPIC_PARTITIONS)
    empty = logs.partition(GROUP_METADATA_TOPIC, OFFSETS_TOPIC_PARTITIONS - 1)
    assert (empty.log_start_offset, empty.log_end_offset, empty.read(0, 1024)) == (0, 0, b"")
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.endswith("-0")) == ["t-0"]
    logs.close()
    assert LogManager(StorageConfig(tmp_path)).topics() == {
        "t": 1,
        GROUP_METADATA_TOPIC: OFFSETS_TOPIC_PARTITIONS,
    }
    (tmp_path / INTERNAL_TOPICS).write_text('{"topics": {"__consumer_offsets": {}}}')
    reopened = LogManager(StorageConfig(tmp_path))
    assert reopened.topics() == {"t": 1}  # the next FindCoordinator makes it again
    reopened.close()
