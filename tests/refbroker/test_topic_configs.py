"""Topic configs on the reference broker (issue 29): CreateTopics checks them as Kafka 3.9 does
(the messages are those the lab's Kafka 3.9 answered), keeps them with the topic across a kill -9,
and a topic's max.message.bytes overrides the broker's message.max.bytes for that topic. With real
clients on both brokers: test_kafka_parity_lab.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from crafted import TIMEOUT, errors_of, produce_request
from kio.schema.create_topics.v7.request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import MetadataRequest
from refbroker_process import RunningBroker, StartBroker

from eoslab.probe.batches import record_batch
from eoslab.refbroker.log_manager import TOPIC_CONFIG, LogManager, StorageConfig
from eoslab.refbroker.topic_configs import (
    InvalidConfigError,
    checked_configs,
    max_message_bytes,
    null_valued,
)

KAFKA_REFUSALS = [
    ([("no.such.config", "1")], "Unknown topic config name: no.such.config"),
    ([("message.max.bytes", "10")], "Unknown topic config name: message.max.bytes"),
    (
        [("max.message.bytes", "abc")],
        "Invalid value abc for configuration max.message.bytes: Not a number of type INT",
    ),
    (
        [("max.message.bytes", "2147483648")],
        "Invalid value 2147483648 for configuration max.message.bytes: Not a number of type INT",
    ),
    (
        [("max.message.bytes", "-1")],
        "Invalid value -1 for configuration max.message.bytes: Value must be at least 0",
    ),
    (
        [("max.message.bytes", None)],
        "Null value not supported for topic configs: max.message.bytes",
    ),
]
"""Configs the lab's Kafka 3.9 refused with INVALID_CONFIG, and its messages."""


@pytest.mark.parametrize(("configs", "message"), KAFKA_REFUSALS)
def test_configs_kafka_refuses_are_refused_with_its_message(
    configs: list[tuple[str, str | None]], message: str
) -> None:
    refusal = null_valued(configs)
    if refusal is None:
        with pytest.raises(InvalidConfigError) as refused:
            checked_configs(configs)
        refusal = str(refused.value)
    assert refusal == message


def test_configs_kafka_accepts_are_kept_the_last_of_a_name_winning() -> None:
    configs = [
        ("max.message.bytes", "2000000"),
        ("retention.ms", "60000"),
        ("max.message.bytes", " 3000000 "),
    ]
    kept = checked_configs(configs)
    assert kept == {"max.message.bytes": " 3000000 ", "retention.ms": "60000"}
    assert max_message_bytes(kept, 1000) == 3_000_000  # Kafka trims the value it parses
    assert max_message_bytes({"max.message.bytes": "0"}, 1000) == 0
    assert max_message_bytes({"retention.ms": "1"}, 1000) == 1000  # the broker's default


def _topic(name: str, configs: list[tuple[str, str | None]]) -> CreatableTopic:
    return CreatableTopic(
        name=name,
        num_partitions=1,
        replication_factor=1,
        assignments=(),
        configs=tuple(CreatableTopicConfig(name=k, value=v) for k, v in configs),
    )


def test_create_topics_refuses_bad_configs_and_creates_nothing(refbroker: RunningBroker) -> None:
    refbroker.create_topic("exists", 1)
    topics = tuple(_topic(f"bad-{i}", configs) for i, (configs, _) in enumerate(KAFKA_REFUSALS))
    checked_only = (_topic("exists", [("no.such.config", "1")]), _topic("new", []))
    with refbroker.client() as client:
        created = client.request(CreateTopicsRequest(topics=topics, timeout=TIMEOUT)).topics
        validated = client.request(
            CreateTopicsRequest(topics=checked_only, timeout=TIMEOUT, validate_only=True)
        ).topics
        listed = client.request(
            MetadataRequest(topics=None, include_topic_authorized_operations=False)
        ).topics
    assert [(r.error_code, r.error_message) for r in created] == [
        (ErrorCode.invalid_config, message) for _, message in KAFKA_REFUSALS
    ]
    # as Kafka 3.9: an existing topic is refused before its configs are looked at, also when
    # only validating (validate_only on a new topic: NONE, nothing made)
    assert [(r.error_code, r.error_message) for r in validated] == [
        (ErrorCode.topic_already_exists, "Topic 'exists' already exists."),
        (ErrorCode.none, None),
    ]
    assert [t.name for t in listed] == ["exists"]


def _batch(size: int) -> bytes:
    """One batch of about `size` bytes, without a producer id (so it may be sent again)."""
    return record_batch(-1, -1, -1, [b"x" * (size - 80)])


def test_a_topics_max_message_bytes_overrides_the_broker_default_across_a_kill(
    start_refbroker: StartBroker,
) -> None:
    broker = start_refbroker("--message-max-bytes", "2000")
    with broker.client() as client:
        created = client.request(
            CreateTopicsRequest(
                topics=(
                    _topic("plain", []),
                    _topic("wide", [("max.message.bytes", "4000")]),
                    _topic("narrow", [("max.message.bytes", "1000"), ("retention.ms", "1")]),
                ),
                timeout=TIMEOUT,
            )
        ).topics
    assert [r.error_code for r in created] == [ErrorCode.none] * 3
    big, small = _batch(3000), _batch(1500)
    assert 2000 < len(big) < 4000
    assert 1000 < len(small) < 2000

    def answers() -> dict[str, list[str]]:
        with broker.client() as client:
            return {
                topic: errors_of(
                    [client.request(produce_request(topic, 0, batch)) for batch in (big, small)]
                )
                for topic in ("plain", "wide", "narrow")
            }

    expected = {
        "plain": ["MESSAGE_TOO_LARGE", "NONE"],  # the broker's message.max.bytes: 2000
        "wide": ["NONE", "NONE"],  # the topic's 4000 overrides it
        "narrow": ["MESSAGE_TOO_LARGE", "MESSAGE_TOO_LARGE"],  # and 1000 too
    }
    assert answers() == expected
    broker.kill()
    broker.start()
    assert answers() == expected
    assert broker.counters()["produce"]["rejected"] == {"MESSAGE_TOO_LARGE": 3}


def test_an_unusable_kept_config_leaves_the_broker_default(tmp_path: Path) -> None:
    logs = LogManager(StorageConfig(tmp_path, max_batch_bytes=2000))
    logs.create_topic("wide", 2, {"max.message.bytes": "4000"})
    big = _batch(3000)
    assert logs.partition("wide", 1).append(big, 0).error is ErrorCode.none
    logs.close()
    (tmp_path / "wide-0" / TOPIC_CONFIG).write_text("{not json")
    reopened = LogManager(StorageConfig(tmp_path, max_batch_bytes=2000))
    # partition 1 still has the topic's configs, and partition 0 gets them back
    assert reopened.partition("wide", 0).append(big, 0).error is ErrorCode.none
    rewritten = json.loads((tmp_path / "wide-0" / TOPIC_CONFIG).read_text())
    assert rewritten["config"] == {"max.message.bytes": "4000"}
    reopened.close()
    for partition in (0, 1):
        (tmp_path / f"wide-{partition}" / TOPIC_CONFIG).write_text('{"config": {"x": "1"}}')
    unusable = LogManager(StorageConfig(tmp_path, max_batch_bytes=2000))
    assert unusable.partition("wide", 0).append(big, 0).error is ErrorCode.message_too_large
    unusable.close()
