"""Two differences from Kafka a franz-go client ran into on the reference broker (issue 29), each
checked with real clients on the lab's Kafka 3.9 (three brokers, RF 3, behind the proxy) and on
the reference broker (behind the proxy too) in the same test: both brokers must answer alike.

1. A topic's max.message.bytes overrides the broker's message.max.bytes: a 5 MiB record goes
   into a topic created with max.message.bytes=10485760 and is refused, by the broker, from one
   without it.
2. Kafka's internal topics, once a group and a transactional producer made them, are listed by
   a Metadata request for every topic with is_internal, so clients that skip internal topics by
   that flag (franz-go's regex consumption) and those that do not (librdkafka's regex
   subscription, checked here: it does not skip them) see the same cluster on both brokers.
"""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from group_clients import franzgo_regex_topics, rdkafka_regex_topics
from kio.schema.metadata.v12 import MetadataRequest

from eoslab.probe.client import KafkaProtocolClient
from eoslab.refbroker.internal_topics import (
    GROUP_METADATA_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    TRANSACTION_STATE_PARTITIONS,
    TRANSACTION_STATE_TOPIC,
)
from eoslab.runtime.local import LocalRuntime
from eoslab.scenarios.executor import REPLICATION, bootstrap_of
from eoslab.settings import HostPort

pytestmark = pytest.mark.lab

TARGETS = ("kafka", "refbroker")
FIVE_MIB = 5 * 1024 * 1024
TOPIC_LIMIT = 10_485_760
"""The topic's max.message.bytes of the issue (10 MiB)."""
INTERNAL = (GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC)
WAIT_S = 60


def _create_topics(bootstrap: str, replication: int, topics: dict[str, dict[str, str]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(name, 1, replication, config=config) for name, config in topics.items()]
    for future in admin.create_topics(new, operation_timeout=30).values():
        future.result(WAIT_S)


def _send_5_mib(bootstrap: str, topics: dict[str, str], value: bytes) -> dict[str, str]:
    """One 5 MiB record to each topic (by role): its offset, or the error and who raised it
    (librdkafka says "Broker: ..." for an error the broker answered)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "message.max.bytes": TOPIC_LIMIT + 65_536,  # the client must let the batch out
            "compression.type": "none",
            "enable.idempotence": True,
        }
    )
    outcomes: dict[str, str] = {}

    def delivered(role: str, error: KafkaError | None, message: Message) -> None:
        outcomes[role] = f"offset {message.offset()}" if error is None else error.str()

    for role, topic in topics.items():
        producer.produce(topic, value, on_delivery=lambda e, m, r=role: delivered(r, e, m))
    assert producer.flush(WAIT_S) == 0
    return outcomes


def _read_first(bootstrap: str, topic: str) -> bytes | None:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"read-{topic}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        message = consumer.poll(WAIT_S)
        assert message is not None, f"nothing read from {topic}"
        assert message.error() is None, message.error()
        return message.value()
    finally:
        consumer.close()


def test_a_topics_max_message_bytes_lets_a_5_mib_record_in_on_both_brokers(
    lab: LocalRuntime,
) -> None:
    value = random.Random(29).randbytes(FIVE_MIB)
    seen = {}
    for target in TARGETS:
        bootstrap = bootstrap_of(target, lab.config)
        topics = {"wide": f"eos-wide-{target}", "plain": f"eos-plain-{target}"}
        _create_topics(
            bootstrap,
            REPLICATION.get(target, 1),
            {topics["wide"]: {"max.message.bytes": str(TOPIC_LIMIT)}, topics["plain"]: {}},
        )
        outcomes = _send_5_mib(bootstrap, topics, value)
        acknowledged = outcomes["wide"].startswith("offset")
        seen[target] = (outcomes, acknowledged and _read_first(bootstrap, topics["wide"]) == value)
    assert seen["kafka"] == (
        {"wide": "offset 0", "plain": "Broker: Message size too large"},
        True,  # read back whole
    )
    assert seen["refbroker"] == seen["kafka"]


def _internal_topics(bootstrap: str) -> dict[str, tuple[bool, int]]:
    """Kafka's internal topics in a Metadata answer for every topic (sent by the probe client
    and by librdkafka's list_topics), with librdkafka's describe_topics' is_internal: by name,
    (is_internal, partitions)."""
    host_port = HostPort.parse(bootstrap.split(",", maxsplit=1)[0])
    with KafkaProtocolClient(host_port.host, host_port.port) as client:
        listed = client.request(
            MetadataRequest(topics=None, include_topic_authorized_operations=False)
        ).topics
    flagged = {t.name: (t.is_internal, len(t.partitions)) for t in listed if t.is_internal}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    every = admin.list_topics(timeout=WAIT_S).topics
    described = admin.describe_topics(TopicCollection(list(INTERNAL)))
    for name in INTERNAL:
        description = described[name].result(WAIT_S)
        assert description.is_internal, name
        assert len(every[name].partitions) == flagged[name][1], name
    return flagged


def test_internal_topics_are_listed_and_skipped_as_on_kafka(
    lab: LocalRuntime, franzgo_binary: Path
) -> None:
    views = {}
    for target in TARGETS:
        bootstrap = bootstrap_of(target, lab.config)
        run = uuid.uuid4().hex[:8]
        own = f"eos-parity-{target}-{run}"
        _create_topics(bootstrap, REPLICATION.get(target, 1), {own: {}})
        # a group (FindCoordinator for a group) and a transactional producer (for its id)
        only_own = rdkafka_regex_topics(bootstrap, f"parity-{run}", f"^{own}")
        Producer({"bootstrap.servers": bootstrap, "transactional.id": run}).init_transactions(30)
        views[target] = (
            _internal_topics(bootstrap),
            only_own,
            rdkafka_regex_topics(bootstrap, f"all-{run}", "^.*"),
            franzgo_regex_topics(franzgo_binary, bootstrap, f"franz-{run}", ".*"),
            own,
        )
    for _, only_own, everything, franz, own in views.values():
        assert only_own == {own}
        # librdkafka's regex subscription takes every listed topic, internal ones included ...
        assert {*INTERNAL, own} <= everything
        # ... franz-go's skips those Metadata flags internal
        assert own in franz
        assert not franz & set(INTERNAL)
    assert views["refbroker"][0] == {
        GROUP_METADATA_TOPIC: (True, OFFSETS_TOPIC_PARTITIONS),
        TRANSACTION_STATE_TOPIC: (True, TRANSACTION_STATE_PARTITIONS),
    }
    assert views["kafka"][0] == views["refbroker"][0]  # the lab's Kafka has Kafka's defaults
