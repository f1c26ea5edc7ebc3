"""Client drivers: names, the Java client's translation of librdkafka's properties (pure logic),
and the Java driver program itself, built from the project and spoken to over its protocol."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from eoslab.admin import create_topic
from eoslab.clients import MATRIX_DRIVERS, ClientError, ClientLaunch, ClientRef, parse_client
from eoslab.clock import now_ms
from eoslab.run_context import RunContext
from eoslab.rundir import REPLICATION, LabTarget, RunDir
from eoslab.runtime.local import LocalRuntime
from eoslab.workload.drivers.api import ClientApi, ConsumerApi
from eoslab.workload.drivers.contract import Line, record
from eoslab.workload.drivers.java import config as java_config
from eoslab.workload.drivers.java import failure_line
from eoslab.workload.drivers.registry import prepare
from eoslab.workload.drivers.remote import (
    DriverProcess,
    RemoteConsumer,
    RemoteProducer,
    kafka_error,
)
from eoslab.workload.spec import TransactionSpec, WorkloadSpec
from eoslab.workload.supervisor import Workload

JAVA = "java:3.9.2"


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("java:3.9.2", ClientRef("java", "3.9.2")),
        ("franz-go:v1.22.2", ClientRef("franz-go", "v1.22.2")),
        ("librdkafka:2.2.0", ClientRef("librdkafka", "2.2.0")),
        ("2.2.0", ClientRef("librdkafka", "2.2.0")),
    ],
)
def test_a_client_is_named_by_family_and_version(text: str, ref: ClientRef) -> None:
    assert parse_client(text) == ref
    assert parse_client(str(ref)) == ref


@pytest.mark.parametrize(
    ("launch", "prefix"),
    [
        (None, "librdkafka"),
        (ClientLaunch(family="librdkafka", version="2.2.0"), "librdkafka"),
        (ClientLaunch(family="franz-go", version="v1.22.2", command=("driver",)), "franz-go"),
    ],
)
def test_a_client_error_is_logged_under_the_clients_name(
    launch: ClientLaunch | None, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ClientApi(launch).log_error(KafkaError(KafkaError.INVALID_TXN_STATE, "in an invalid state"))
    assert capsys.readouterr().err == f"{prefix}: INVALID_TXN_STATE: in an invalid state\n"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("cobol:1", "unknown client library 'cobol'"),
        ("java:", "is not a version"),
        ("java:3.9 2", "is not a version"),
    ],
)
def test_a_bad_client_name_is_one_line(text: str, problem: str) -> None:
    with pytest.raises(ClientError, match=problem) as raised:
        parse_client(text)
    assert "\n" not in str(raised.value)


def test_librdkafka_properties_become_the_java_clients_own() -> None:
    native, stats_ms = java_config.producer(
        {
            "bootstrap.servers": "127.0.0.1:9092",
            "enable.idempotence": False,
            "acks": 1,
            "max.in.flight.requests.per.connection": 5,
            "socket.timeout.ms": 4000,
            "request.timeout.ms": 3000,
            "message.timeout.ms": 9000,
            "batch.num.messages": 1,
            "statistics.interval.ms": 1000,
            "stats_cb": print,
        }
    )
    assert native == {
        "bootstrap.servers": "127.0.0.1:9092",
        "enable.idempotence": "false",
        "acks": "1",
        "max.in.flight.requests.per.connection": "5",
        "request.timeout.ms": "3000",  # the smaller of librdkafka's two timeouts
        "delivery.timeout.ms": "9000",
        "batch.size": "1",  # one record per batch
    }
    assert stats_ms == 1000
    consumer, _ = java_config.consumer(
        {
            "group.id": "g",
            "auto.offset.reset": "smallest",
            "enable.partition.eof": True,
            "partition.assignment.strategy": "cooperative-sticky",
        }
    )
    assert consumer == {
        "group.id": "g",
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": (
            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
        ),
    }


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"enable.gapless.guarantee": True}, "enable.gapless.guarantee: librdkafka's property"),
        ({"batch.num.messages": 50}, "batch.num.messages: 50"),
        ({"message.timeout.ms": 1000, "request.timeout.ms": 2000}, "below linger.ms"),
    ],
)
def test_a_property_the_java_client_has_no_equivalent_for_is_refused(
    config: dict[str, object], problem: str
) -> None:
    with pytest.raises(java_config.DriverConfigError, match=problem):
        java_config.producer(config)


def test_a_missing_java_release_is_one_line() -> None:
    output = (
        "[ERROR] Failed to execute goal on project java-driver: Could not resolve dependencies "
        "for project eoslab.clients:java-driver:jar:1: Could not find artifact "
        "org.apache.kafka:kafka-clients:jar:9.9.9 in central\n"
    )
    assert failure_line("9.9.9", output) == (
        "java:9.9.9: org.apache.kafka:kafka-clients 9.9.9 is not on Maven Central "
        "(or Maven Central is not reachable)"
    )


def test_the_java_driver_is_built_once_and_refuses_a_release_maven_central_lacks() -> None:
    said: list[str] = []
    launch = prepare(parse_client(JAVA), said.append)
    again = prepare(parse_client(JAVA), said.append)
    assert launch == again
    assert len(said) <= 1  # built at most once (the session may have built it already)
    with pytest.raises(ClientError) as missing:
        prepare(parse_client("java:9.9.9"), said.append)
    assert str(missing.value) == (
        "java:9.9.9: org.apache.kafka:kafka-clients 9.9.9 is not on Maven Central "
        "(or Maven Central is not reachable)"
    )


def test_the_driver_answers_with_its_clients_version_and_librdkafkas_error_names() -> None:
    driver = DriverProcess(prepare(parse_client(JAVA)))
    try:
        assert driver.version == "3.9.2"
        with pytest.raises(KafkaException) as refused:
            driver.call({"op": "no-such-command"})
        assert refused.value.args[0].code() == KafkaError._STATE
    finally:
        driver.close()
    error = kafka_error({"code": -144, "reason": "fenced", "fatal": True})
    assert (error.name(), error.fatal(), error.retriable()) == ("_FENCED", True, False)


def test_a_driver_that_runs_another_release_than_asked_is_refused() -> None:
    built = prepare(parse_client(JAVA))
    mislabelled = ClientLaunch(family="java", version="3.3.1", command=built.command)
    with pytest.raises(KafkaException, match=r"runs client 3\.9\.2, not 3\.3\.1"):
        DriverProcess(mislabelled)


class ConsumeFails:
    """A driver whose consumer's every consume fails with ``error`` (pure logic: how the
    session's half of the protocol hands it to the role)."""

    def __init__(self, error: Line) -> None:
        self.error = error

    def new_handle(self, prefix: str) -> str:
        return f"{prefix}1"

    def listen(self, *_: object) -> None:
        return None

    def call(self, line: Line) -> Line:
        if line["op"] == "consume":
            raise KafkaException(kafka_error(self.error))
        return {}


@pytest.mark.parametrize(
    ("error", "raised"),
    [
        ({"code": KafkaError._TIMED_OUT, "reason": "offsets by times", "retriable": True}, False),
        ({"code": KafkaError.TOPIC_AUTHORIZATION_FAILED, "reason": "denied"}, True),
        ({"code": KafkaError._FATAL, "reason": "fenced", "fatal": True}, True),
    ],
)
def test_an_error_the_client_gets_past_by_itself_is_no_record_and_a_callback(
    error: Line, raised: bool
) -> None:
    """As librdkafka's poll retries inside: the Java client's offset lookup timing out while
    its broker restarts is no record and an error callback (a reader raising it died with the
    topic half read); an error it cannot get past is raised."""
    told: list[KafkaError] = []
    driver = ConsumeFails(error)
    consumer = RemoteConsumer(driver, {"error_cb": told.append}, lambda _config: ({}, 0))  # type: ignore[arg-type]
    if raised:
        with pytest.raises(KafkaException):
            consumer.consume(10, 0.1)
        assert told == []
    else:
        assert consumer.consume(10, 0.1) == []
        assert [e.code() for e in told] == [KafkaError._TIMED_OUT]


def test_a_driver_exits_at_once_when_its_session_is_gone() -> None:
    launch = prepare(parse_client(JAVA))
    child = subprocess.Popen(list(launch.command), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None
    child.stdin.close()
    assert child.wait(timeout=30) == 0


def read_to_the_end(consumer: ConsumerApi, topic: str) -> list[bytes]:
    """Every value of partition 0 from its start to the end an end-of-partition item names."""
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    return read_on_to_an_end(consumer, topic)[0]


def read_on_to_an_end(consumer: ConsumerApi, topic: str) -> tuple[list[bytes], int]:
    """The values read from where the consumer is to the next end-of-partition item, and the
    offset that item names."""
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        error = message.error()
        if error is not None and error.code() == KafkaError._PARTITION_EOF:
            return values, message.offset() or 0
        assert error is None, error
        values.append(message.value() or b"")
    raise AssertionError(f"{topic} not read to an end in 60 s ({len(values)} values)")


@pytest.mark.parametrize("ref", ["librdkafka", *(str(ref) for ref in MATRIX_DRIVERS)])
@pytest.mark.parametrize("target", ["kafka", "refbroker"])
def test_a_reader_at_the_end_reaches_it_again_past_a_transactions_marker(
    lab: LocalRuntime, target: LabTarget, ref: str
) -> None:
    """A read_uncommitted reader at the end of a partition while a transaction is open (its
    records in the log, its marker not yet) reaches the end again when the commit's marker
    moves its position without a record: a run's reader is complete only past the last marker.
    The Java driver gave an end once per record handed out (txn-coordinator-isolated, Java
    3.9.2, Kafka 3.9: its reader stuck before the last marker, invalid in two full matrices)."""
    bootstrap = lab.config.bootstrap(target)
    topic = f"marker-end-{target}-{time.monotonic_ns()}"
    create_topic(bootstrap, topic, 1, REPLICATION[target])
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic})
    txn.init_transactions(30)
    txn.begin_transaction()
    for n in range(3):
        txn.produce(topic, value=f"v{n}".encode(), partition=0)
    assert txn.flush(30) == 0
    client = ClientApi(None if ref == "librdkafka" else prepare(parse_client(ref)))
    try:
        reader = client.consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": topic,
                "isolation.level": "read_uncommitted",
                "enable.partition.eof": True,
            }
        )
        reader.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert read_on_to_an_end(reader, topic) == ([b"v0", b"v1", b"v2"], 3)
        txn.commit_transaction(30)
        assert read_on_to_an_end(reader, topic) == ([], 4)  # past the marker at offset 3
        reader.close()
    finally:
        client.close()


@pytest.mark.parametrize(
    "target", ["kafka", pytest.param("kafka4", marks=pytest.mark.kafka4), "refbroker"]
)
def test_the_java_client_produces_transacts_and_reads_on_every_target(
    lab: LocalRuntime, target: LabTarget
) -> None:
    """Interop: Kafka's Java client, through its driver, against Kafka 3.9, Kafka 4 and the
    reference broker: an idempotent producer's records come back in order with the offsets its
    delivery reports gave; a committed transaction is read read_committed, an aborted one not."""
    bootstrap = lab.config.bootstrap(target)
    topic = f"java-interop-{target}-{time.monotonic_ns()}"
    create_topic(bootstrap, topic, 1, REPLICATION[target])
    client = ClientApi(prepare(parse_client(JAVA)))
    try:
        acked: list[int] = []
        producer = client.producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        for n in range(200):
            producer.produce(
                topic,
                value=f"v{n}".encode(),
                partition=0,
                on_delivery=lambda error, msg: acked.append(-1 if error else msg.offset() or 0),
            )
        assert producer.flush(60) == 0
        assert acked == list(range(200))
        txn = client.producer({"bootstrap.servers": bootstrap, "transactional.id": topic})
        txn.init_transactions(30)
        for commit in (True, False):
            txn.begin_transaction()
            txn.produce(topic, value=b"committed" if commit else b"aborted", partition=0)
            if commit:
                txn.commit_transaction(30)
            else:
                assert txn.flush(30) == 0
                txn.abort_transaction(30)
        reader = client.consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": topic,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
            }
        )
        values = read_to_the_end(reader, topic)
        assert values == [f"v{n}".encode() for n in range(200)] + [b"committed"]
        reader.close()
    finally:
        client.close()


@pytest.mark.parametrize("ref", [str(ref) for ref in MATRIX_DRIVERS])
def test_a_drivers_client_sends_a_burst_by_itself(lab: LocalRuntime, ref: str) -> None:
    """`make bench`'s comparison point for a driver: its client sending alone puts every record
    of the burst in the log and says how long it took."""
    bootstrap = lab.config.bootstrap("kafka")
    topic = f"burst-{parse_client(ref).family}-{time.monotonic_ns()}"
    create_topic(bootstrap, topic, 1, REPLICATION["kafka"])
    client = ClientApi(prepare(parse_client(ref)))
    try:
        producer = client.producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        assert isinstance(producer, RemoteProducer)
        answer = producer.burst(topic, 0, 500, 64)
    finally:
        client.close()
    assert answer["failed"] == 0
    assert answer["seconds"] > 0
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": topic})
    try:
        assert reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=30) == (0, 500)
    finally:
        reader.close()


EVERY_BYTE = bytes(range(256)) * 4
ODD_RECORDS: list[tuple[bytes | None, bytes | None]] = [
    (None, EVERY_BYTE),
    (b"", b""),
    (EVERY_BYTE[::-1], None),  # a tombstone
    (b"k\n{", b'{"op":"exit"}\n'),  # what a line of the protocol would look like, as bytes
]


@pytest.mark.parametrize("ref", [str(ref) for ref in MATRIX_DRIVERS])
def test_a_drivers_records_cross_as_bytes_and_every_token_gets_its_outcome(
    lab: LocalRuntime, ref: str
) -> None:
    """The produce path's binary payload: null and empty keys and values, every byte value,
    records of two topics interleaved (one payload each in turn) arrive as they were sent, at
    the offsets their acknowledgements gave; records for a producer the driver does not have
    each get a failed delivery."""
    bootstrap = lab.config.bootstrap("kafka")
    topics = [f"bytes-{parse_client(ref).family}-{n}-{time.monotonic_ns()}" for n in (0, 1)]
    for topic in topics:
        create_topic(bootstrap, topic, 1, REPLICATION["kafka"])
    client = ClientApi(prepare(parse_client(ref)))
    acked: dict[str, list[tuple[int, bytes | None, bytes | None]]] = {t: [] for t in topics}
    try:
        producer = client.producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        assert isinstance(producer, RemoteProducer)
        for key, value in ODD_RECORDS * 3:
            for topic in topics:
                producer.produce(
                    topic,
                    value=value,
                    key=key,
                    partition=0,
                    on_delivery=lambda error, msg: acked[str(msg.topic())].append(
                        (-1 if error else msg.offset() or 0, msg.key(), msg.value())
                    ),
                )
        assert producer.flush(60) == 0
    finally:
        client.close()
    driver = DriverProcess(prepare(parse_client(ref)))
    outcomes: list[Line | None] = []
    try:
        token = next(driver.tokens)
        driver.deliveries[token] = lambda _t, _p, _o, failed: outcomes.append(failed)
        driver.produce("p-none", topics[0], token, record(token, 0, None, b"lost"))
        deadline = time.monotonic() + 30
        while not outcomes and time.monotonic() < deadline:
            driver.serve(0.1)
    finally:
        driver.close()
    (failed,) = outcomes
    assert failed is not None
    assert kafka_error(failed).code() == KafkaError._STATE
    for topic in topics:
        assert acked[topic] == [(n, k, v) for n, (k, v) in enumerate(ODD_RECORDS * 3)]
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": topic})
        try:
            reader.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            read = [reader.poll(30) for _ in ODD_RECORDS * 3]
        finally:
            reader.close()
        assert [(m.offset(), m.key(), m.value()) for m in read if m is not None] == acked[topic]


@pytest.mark.parametrize(
    ("ref", "transactional"),
    [("librdkafka", False), ("librdkafka", True), *((str(r), False) for r in MATRIX_DRIVERS)],
)
def test_a_warm_start_is_ready_once_the_first_record_has_its_outcome(
    lab: LocalRuntime, tmp_path: Path, ref: str, transactional: bool
) -> None:
    """The run's first sessions start warm (no fault in place before them): the workload's start
    returns only once each session's first record is acknowledged, so the fault clock starts
    with a workload that flows, on every client; the rest of the share follows at its rate."""
    bootstrap = lab.config.bootstrap("kafka")
    topic = f"warm-{ref.replace(':', '-')}-{transactional:d}-{time.monotonic_ns()}"
    create_topic(bootstrap, topic, 3, REPLICATION["kafka"])
    run_dir = RunDir(tmp_path / "run").create()
    if transactional:
        run_dir.create_transactions()
    workload = Workload(
        WorkloadSpec(
            records=60,
            producers=2,
            rate=200,
            keys=8,
            transactions=TransactionSpec(records_per_transaction=5, abort_ratio=0)
            if transactional
            else None,
        ),
        RunContext(
            run_id="warm",
            run_dir=run_dir,
            target="kafka",
            lab_target="kafka",
            bootstrap=bootstrap,
            topic=topic,
            partitions=3,
            seed=1,
            client=None if ref == "librdkafka" else prepare(parse_client(ref)),
        ),
        {"enable.idempotence": True, "acks": "all"},
    )
    workload.start(warm=True)
    ready_ms = now_ms()
    try:
        assert workload.wait(60)
    finally:
        workload.stop()
    rows = ds.dataset(run_dir.history_dir).to_table().to_pylist()
    assert len(rows) == 60
    assert {row["outcome"] for row in rows} == {"ack"}
    first_ack = {
        s.session_id: min(r["ack_ms"] for r in rows if r["session_id"] == s.session_id)
        for s in workload.sessions
    }
    assert len(first_ack) == 2
    assert max(first_ack.values()) <= ready_ms  # each had an acknowledgement when start returned
    if transactional:  # both sessions' transactions sealed into the ledger
        assert len(list(run_dir.transactions_dir.glob("*.parquet"))) == 2
