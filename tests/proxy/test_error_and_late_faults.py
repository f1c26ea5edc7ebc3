"""The `error` and `late` faults end to end: librdkafka (confluent-kafka) through the lab's
chaos proxy against the reference broker and Kafka 3.9, each injection seen by the client (an
error it retries past or dies of) and by the broker (what it wrote, counted or refused)."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from typer.testing import CliRunner

from eoslab.proxy.command import app
from eoslab.proxy.control_client import ProxyControl
from eoslab.proxy.faults import parse_fault_spec
from eoslab.proxy.faults.spec import FaultEvidence
from eoslab.refbroker.control_client import RefbrokerControl
from eoslab.rundir import LabTarget
from eoslab.runtime.local import LocalRuntime
from eoslab.scenarios.catalogue import ScenarioError, load_scenario

pytestmark = pytest.mark.lab

RECORDS = 200


@pytest.fixture
def proxy(lab: LocalRuntime) -> Iterator[ProxyControl]:
    """The lab's proxy, without faults before and after the test."""
    control = ProxyControl(lab.config.proxy_control_url)
    control.clear()
    yield control
    control.clear()


@pytest.fixture
def refbroker(lab: LocalRuntime) -> RefbrokerControl:
    return RefbrokerControl(lab.config.refbroker_control_url)


def new_topic(bootstrap: str, partitions: int = 2) -> str:
    topic = f"errors-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    return topic


def producer(bootstrap: str, **overrides: object) -> Producer:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "linger.ms": 5,
        "batch.num.messages": 10,
        "request.timeout.ms": 3000,
        "socket.timeout.ms": 3000,
        "retry.backoff.ms": 50,
        **overrides,
    }
    return Producer(config)


class Deliveries:
    def __init__(self) -> None:
        self.acked: list[bytes] = []
        self.failed: list[str] = []

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.acked.append(message.value() or b"")
        else:
            self.failed.append(error.name())


def produce(client: Producer, topic: str, values: list[bytes], timeout_s: float = 30) -> Deliveries:
    """Each value to partition index % 2, in order; every outcome in."""
    deliveries = Deliveries()
    for index, value in enumerate(values):
        client.produce(topic, value, partition=index % 2, on_delivery=deliveries)
        client.poll(0)
    assert client.flush(timeout_s) == 0
    return deliveries


def values(count: int, prefix: str = "r") -> list[bytes]:
    return [f"{prefix}-{index:04d}".encode() for index in range(count)]


def read_topic(bootstrap: str, topic: str, partitions: int = 2, **config: object) -> list[bytes]:
    """Every record of the topic (read through the proxy, which no fault touches by then)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{topic}",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            **config,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    records: list[bytes] = []
    ended: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(ended) < partitions and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is None:
                records.append(message.value() or b"")
            elif error.code() == KafkaError._PARTITION_EOF:
                ended.add(message.partition() or 0)
    finally:
        consumer.close()
    assert len(ended) == partitions, f"end of {topic} not reached"
    return records


def took_effect(control: ProxyControl, fault_id: str, spec: dict[str, Any]) -> tuple[bool, str]:
    """The fault's own judgement of its evidence, as the nemesis asks it."""
    evidence = FaultEvidence.model_validate(control.fault(fault_id)["evidence"])
    return parse_fault_spec(spec).took_effect(evidence)


def fatal_error(client: Producer, timeout_s: float = 20) -> KafkaError:
    """The fatal error poll raises once the client has one."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            client.poll(0.1)
        except KafkaException as raised:
            return raised.args[0]
    raise AssertionError(f"no fatal error in {timeout_s} s")


# ---------------------------------------------------------------------------- rewrite
REWRITE_NOT_ENOUGH_REPLICAS = {
    "kind": "error",
    "route": "refbroker",
    "api": "Produce",
    "error": "NOT_ENOUGH_REPLICAS",
    "mode": "rewrite",
    "count": 3,
}


def test_a_written_batch_answered_not_enough_replicas_is_retried_and_deduplicated(
    lab: LocalRuntime, proxy: ProxyControl, refbroker: RefbrokerControl
) -> None:
    bootstrap = lab.config.refbroker_bootstrap
    topic = new_topic(bootstrap)
    client = producer(bootstrap)
    produce(client, topic, values(2, "warm"))
    deduplicated_before = refbroker.counters()["produce"]["deduplicated"]
    fault_id = proxy.add(REWRITE_NOT_ENOUGH_REPLICAS)

    deliveries = produce(client, topic, values(RECORDS))

    assert deliveries.failed == []
    assert took_effect(proxy, fault_id, REWRITE_NOT_ENOUGH_REPLICAS)[0]
    evidence = proxy.fault(fault_id)["evidence"]
    assert evidence["replaced"] == {"NONE": 3}  # the broker had written all three
    assert refbroker.counters()["produce"]["deduplicated"] - deduplicated_before >= 3
    stored = read_topic(bootstrap, topic)
    assert sorted(stored) == sorted([*values(2, "warm"), *values(RECORDS)])


def test_without_idempotence_the_same_rewrite_writes_the_retried_batches_twice(
    lab: LocalRuntime, proxy: ProxyControl
) -> None:
    """The negative control: the rewritten answers really hid writes that had happened."""
    bootstrap = lab.config.refbroker_bootstrap
    topic = new_topic(bootstrap)
    client = producer(bootstrap, **{"enable.idempotence": False, "retries": 5})
    produce(client, topic, values(2, "warm"))
    fault_id = proxy.add(REWRITE_NOT_ENOUGH_REPLICAS)

    deliveries = produce(client, topic, values(RECORDS))

    assert deliveries.failed == []
    assert proxy.fault(fault_id)["injected"] == 3
    stored = Counter(read_topic(bootstrap, topic))
    assert set(stored) == {*values(2, "warm"), *values(RECORDS)}
    assert sum(stored.values()) > RECORDS + 2


def test_an_out_of_order_sequence_answer_to_a_written_batch_is_fatal_to_librdkafka(
    lab: LocalRuntime, proxy: ProxyControl
) -> None:
    """librdkafka takes OUT_OF_ORDER_SEQUENCE_NUMBER for its first batch in flight as a lost
    sequence ("sequence desynchronization"): fatal. The batch was written all the same."""
    bootstrap = lab.config.bootstrap_servers
    topic = new_topic(bootstrap)
    client = producer(bootstrap)
    produce(client, topic, values(2, "warm"))
    spec = {
        "kind": "error",
        "api": "Produce",
        "partition": 1,
        "error": "OUT_OF_ORDER_SEQUENCE_NUMBER",
        "mode": "rewrite",
        "count": 1,
    }
    fault_id = proxy.add(spec)

    client.produce(topic, b"doomed", partition=1)
    error = fatal_error(client)

    assert (error.code(), error.fatal()) == (KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, True)
    assert f"{topic} [1]" in error.str()
    assert "sequence desynchronization" in error.str()
    assert took_effect(proxy, fault_id, spec) == (
        True,
        "rewrote the responses to 1 Produce request(s) on 1 connection(s): 1 result(s) now "
        f"OUT_OF_ORDER_SEQUENCE_NUMBER ({topic}:1; were NONE x1)",
    )
    proxy.clear()
    assert b"doomed" in read_topic(bootstrap, topic)


# ---------------------------------------------------------------------------- reject
def test_init_producer_id_answered_request_timed_out_by_the_proxy_is_retried(
    lab: LocalRuntime, proxy: ProxyControl, refbroker: RefbrokerControl
) -> None:
    bootstrap = lab.config.refbroker_bootstrap
    topic = new_topic(bootstrap)
    spec = {
        "kind": "error",
        "route": "refbroker",
        "api": "InitProducerId",
        "error": "REQUEST_TIMED_OUT",
        "mode": "reject",
        "count": 2,
    }
    broker_before = refbroker.counters()["requests"].get("InitProducerId", 0)
    proxy_before = proxy.counters()["routes"]["refbroker"]["apis"]
    fault_id = proxy.add(spec)

    deliveries = produce(producer(bootstrap), topic, values(10))

    assert deliveries.failed == []
    assert took_effect(proxy, fault_id, spec)[0]
    sent = proxy.counters()["routes"]["refbroker"]["apis"]["InitProducerId"]["request_frames"]
    sent -= proxy_before.get("InitProducerId", {}).get("request_frames", 0)
    assert sent == 3
    assert refbroker.counters()["requests"]["InitProducerId"] - broker_before == 1


def test_a_rejected_produce_never_reaches_the_broker_so_its_resend_is_not_a_duplicate(
    lab: LocalRuntime, proxy: ProxyControl
) -> None:
    """Without idempotence, a resent batch the broker had seen is a duplicate (the rewrite
    above); the proxy's own answers leave none: the broker never saw those requests. Several
    requests are in flight on the connection, so each answer also keeps its turn."""
    bootstrap = lab.config.bootstrap_servers
    topic = new_topic(bootstrap)
    client = producer(bootstrap, **{"enable.idempotence": False, "retries": 5, "linger.ms": 0})
    produce(client, topic, values(2, "warm"))
    spec = {
        "kind": "error",
        "api": "Produce",
        "partition": 1,
        "error": "NOT_ENOUGH_REPLICAS",
        "mode": "reject",
        "count": 3,
    }
    fault_id = proxy.add(spec)

    deliveries = produce(client, topic, values(RECORDS))

    assert deliveries.failed == []
    assert took_effect(proxy, fault_id, spec)[0]
    assert Counter(read_topic(bootstrap, topic)) == Counter([*values(2, "warm"), *values(RECORDS)])


# ---------------------------------------------------------------------------- late
def await_late_answer(
    control: ProxyControl, fault_id: str, timeout_s: float = 30
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        copies = control.fault(fault_id)["evidence"]["late"]
        if copies and all(c["answer"] is not None or c["failure"] for c in copies):
            return copies[0]
        time.sleep(0.2)
    raise AssertionError(f"late copy of {fault_id} neither answered nor failed")


def test_a_late_copy_of_a_produce_is_delivered_answered_and_written_again(
    lab: LocalRuntime, proxy: ProxyControl
) -> None:
    """Forwarded and delivered again 500 ms later on a connection of the proxy's own: without
    idempotence the broker writes the record twice."""
    bootstrap = lab.config.bootstrap_servers
    topic = new_topic(bootstrap, partitions=1)
    client = producer(bootstrap, **{"enable.idempotence": False})
    produce(client, topic, [b"warm"])
    spec = {"kind": "late", "api": "Produce", "forward": True, "after_ms": 500}
    fault_id = proxy.add(spec)

    client.produce(topic, b"twice", partition=0)
    assert client.flush(10) == 0
    copy = await_late_answer(proxy, fault_id)

    assert copy["answer"] == {f"{topic}:0": "NONE"}
    assert copy["delivered_ms"] - copy["captured_ms"] >= 500
    assert took_effect(proxy, fault_id, spec)[0]
    proxy.clear()
    assert read_topic(bootstrap, topic, partitions=1) == [b"warm", b"twice", b"twice"]


def test_a_late_copy_still_waiting_when_its_fault_is_removed_is_never_delivered(
    lab: LocalRuntime, proxy: ProxyControl
) -> None:
    bootstrap = lab.config.refbroker_bootstrap
    topic = new_topic(bootstrap, partitions=1)
    client = producer(bootstrap)
    fault_id = proxy.add(
        {
            "kind": "late",
            "route": "refbroker",
            "api": "Produce",
            "forward": True,
            "after_ms": 60_000,
        }
    )
    produce(client, topic, [b"once"])
    assert len(proxy.fault(fault_id)["evidence"]["late"]) == 1

    proxy.remove(fault_id)

    deadline = time.monotonic() + 10
    ends: list[dict[str, Any]] = []
    while not ends and time.monotonic() < deadline:
        ends = [e for e in proxy.log() if e["fault_id"] == fault_id and e.get("late") == "failed"]
        time.sleep(0.1)
    assert ends[0]["failure"] == "the fault was removed before the copy was delivered"
    assert read_topic(bootstrap, topic, partitions=1) == [b"once"]


@pytest.mark.parametrize("target", ["refbroker", "kafka"])
def test_a_produce_delivered_after_its_transaction_was_aborted_is_refused(
    lab: LocalRuntime, proxy: ProxyControl, target: LabTarget
) -> None:
    """KAFKA-12671's late write: the producer's Produce held back, its transaction aborted,
    then the Produce delivered. Both brokers verify a transaction's first write to a partition
    (KIP-890 part 1) and refuse it; Kafka writes the abort's markers after answering EndTxn,
    hence the extra second."""
    bootstrap = lab.config.bootstrap(target)
    topic = new_topic(bootstrap, partitions=1)
    client = producer(
        bootstrap,
        **{"transactional.id": topic, "linger.ms": 0, "message.timeout.ms": 6000},
    )
    client.init_transactions(30)
    spec = {
        "kind": "late",
        "api": "Produce",
        "forward": False,
        "after_api": "EndTxn",
        "after_ms": 1000,
    }
    fault_id = proxy.add(spec)
    client.begin_transaction()
    client.produce(topic, b"aborted", partition=0)
    client.flush(10)
    client.abort_transaction(30)
    copy = await_late_answer(proxy, fault_id)

    assert copy["answer"] == {f"{topic}:0": "INVALID_TXN_STATE"}
    assert copy["delivered_ms"] - copy["released_ms"] >= 1000
    ok, line = took_effect(proxy, fault_id, spec)
    assert ok, line
    assert "held back" in line
    assert "answered INVALID_TXN_STATE" in line
    proxy.clear()
    assert read_topic(bootstrap, topic, partitions=1, **{"isolation.level": "read_committed"}) == []


# ---------------------------------------------------------------------------- bad input
def test_a_bad_error_fault_is_refused_by_the_cli_and_in_a_scenario_file_with_one_line(
    lab: LocalRuntime, proxy: ProxyControl, tmp_path: Path
) -> None:
    bad = '{"kind": "error", "api": "Produce", "error": "OUT_OF_ORDER_SEQUENCE_NUMBR", "mode": "rewrite"}'

    refused = CliRunner().invoke(app, ["fault", "add", bad, "--control", proxy.url])

    assert refused.exit_code == 1
    assert refused.output.strip().splitlines() == [
        "HTTP 400: POST /faults: error: unknown Kafka error 'OUT_OF_ORDER_SEQUENCE_NUMBR' "
        "(names such as OUT_OF_ORDER_SEQUENCE_NUMBER)"
    ]
    assert proxy.faults() == []
    scenario = tmp_path / "bad-error.yaml"
    scenario.write_text(
        "name: bad-error\ndescription: x\ntargets: [refbroker]\n"
        "workload: {producers: 1, records: 100, rate: 100}\n"
        "nemesis:\n  - kind: proxy\n    at: 1\n    target: refbroker\n    duration: 2\n"
        "    fault: {kind: error, api: Metadata, partition: 1, error: LEADER_NOT_AVAILABLE,"
        " mode: rewrite}\n"
    )
    with pytest.raises(ScenarioError) as refusal:
        load_scenario(scenario)
    assert str(refusal.value).splitlines() == [
        f"{scenario}: nemesis.0.fault.error: partition: Metadata has no per-partition results "
        "(these have: Produce, Fetch, ListOffsets, OffsetCommit, OffsetFetch, DeleteRecords, "
        "OffsetForLeaderEpoch, AddPartitionsToTxn, TxnOffsetCommit, OffsetDelete, "
        "DescribeProducers)"
    ]
