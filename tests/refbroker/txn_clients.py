"""Real transactional clients for the tests, each bounded: a confluent-kafka (librdkafka)
transactional producer, read_committed and read_uncommitted readers of whole topics, and Kafka's
own Java TransactionalMessageCopier (kafka-tools 3.9 or 4.4, a consume-transform-produce loop
with random aborts, its JSON status lines parsed; the 4.4 client's producer requests logged).

librdkafka waits silently forever when the broker lacks something: every call here has a
timeout, and every wait a deadline.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from group_clients import WAIT_S, quiet_log4j
from kio.schema.errors import ErrorCode

from eoslab.probe.client import KafkaProtocolClient
from eoslab.probe.requests import describe_transactions_request
from eoslab.probe.txn_runner import find_transaction_coordinator
from eoslab.settings import kafka_lib

CALL_TIMEOUT_S = 30.0
"""Every transactional call (init, commit, abort, send offsets) gives up after this."""
COPIER_TIMEOUT_S = 180.0


def transactional_producer(bootstrap: str, transactional_id: str, **overrides: Any) -> Producer:
    """A producer with its transactional id initialised (InitProducerId through the
    transaction coordinator)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": 5,
            **overrides,
        }
    )
    producer.init_transactions(CALL_TIMEOUT_S)
    return producer


def produce_transaction(
    producer: Producer, topic: str, values: Iterable[tuple[int, bytes]], *, commit: bool
) -> None:
    """One transaction of (partition, value) records, committed or aborted."""
    producer.begin_transaction()
    for partition, value in values:
        producer.produce(topic, value=value, partition=partition)
    if commit:
        producer.commit_transaction(CALL_TIMEOUT_S)
    else:
        producer.flush(CALL_TIMEOUT_S)  # the records are in the log before the abort
        producer.abort_transaction(CALL_TIMEOUT_S)


def read_all(
    bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed"
) -> dict[int, list[bytes]]:
    """Every value of every partition from offset 0 to its end as the isolation level sees it
    (read_committed: up to the last stable offset, aborted records dropped)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    values: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + WAIT_S
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic} not read to its end in {WAIT_S} s: {values}")
            message = consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition())
            elif error is not None:
                raise AssertionError(f"reading {topic}: {error}")
            else:
                at_end.discard(message.partition())
                values[message.partition()].append(message.value())
    finally:
        consumer.close()
    return values


def fenced(error: KafkaException) -> bool:
    """librdkafka's verdict on a producer whose epoch is gone: a fatal fencing error."""
    kafka_error = error.args[0]
    return bool(kafka_error.fatal()) and kafka_error.code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    )


def transaction_epoch(bootstrap: str, transactional_id: str) -> tuple[int, int, str]:
    """(producer id, producer epoch, state) of a transactional id, as its coordinator answers
    DescribeTransactions."""
    host, port = find_transaction_coordinator(bootstrap, transactional_id)
    with KafkaProtocolClient(host, port, timeout_s=CALL_TIMEOUT_S) as client:
        answer = client.request(describe_transactions_request(transactional_id))
    (state,) = answer.transaction_states
    assert state.error_code == ErrorCode.none, f"{transactional_id}: {state.error_code}"
    return int(state.producer_id), int(state.producer_epoch), state.transaction_state


def quiet_log4j2(log_dir: Path, requests_log: Path) -> Path:
    """log4j 2 (Kafka 4's clients) to stderr at WARN, stdout left to the tool's JSON lines
    (log4j's own status messages too go to stderr); and, to ``requests_log``, every request the
    clients send and every answer they get (NetworkClient at DEBUG), with the transaction
    manager's DEBUG lines."""
    path = log_dir / "java-client-log4j2.properties"
    path.write_text(
        "status = warn\n"
        "dest = err\n"
        "appender.stderr.type = Console\n"
        "appender.stderr.name = STDERR\n"
        "appender.stderr.target = SYSTEM_ERR\n"
        "appender.stderr.layout.type = PatternLayout\n"
        "appender.stderr.layout.pattern = %d %p %c: %m%n\n"
        "appender.requests.type = File\n"
        "appender.requests.name = REQUESTS\n"
        f"appender.requests.fileName = {requests_log}\n"
        "appender.requests.append = false\n"
        "appender.requests.layout.type = PatternLayout\n"
        "appender.requests.layout.pattern = %d %p %c: %m%n\n"
        "rootLogger.level = WARN\n"
        "rootLogger.appenderRef.stderr.ref = STDERR\n"
        "rootLogger.appenderRef.stderr.level = WARN\n"
        "logger.network.name = org.apache.kafka.clients.NetworkClient\n"
        "logger.network.level = DEBUG\n"
        "logger.network.appenderRef.requests.ref = REQUESTS\n"
        "logger.txn.name = org.apache.kafka.clients.producer.internals.TransactionManager\n"
        "logger.txn.level = DEBUG\n"
        "logger.txn.appenderRef.requests.ref = REQUESTS\n"
    )
    return path


SENT = re.compile(
    r"\[Producer clientId=[^\]]*\] Sending (?P<api>[A-Z_]+) request with header "
    r"RequestHeader\(apiKey=[A-Z_]+, apiVersion=(?P<version>\d+)"
)
EPOCH_ANSWER = re.compile(
    r"\[Producer clientId=[^\]]*\] Received (?P<api>INIT_PRODUCER_ID|END_TXN) response .*"
    r"ResponseData\(throttleTimeMs=\d+, errorCode=(?P<error>-?\d+), producerId=-?\d+, "
    r"producerEpoch=(?P<epoch>-?\d+)"
)


@dataclass(frozen=True)
class ProducerRequests:
    """What the copier's producer sent, from its request log: requests per (API, version)
    (retries too), and the producer epoch each successful InitProducerId and EndTxn answer
    carried (-1 in an EndTxn answer before v5, which has none)."""

    sent: Counter[tuple[str, int]]
    answered_epochs: list[tuple[str, int]]
    tv2_lines: list[str]
    """The transaction manager's "Updating isTV2 enabled to ..." lines."""

    def versions(self, api: str) -> set[int]:
        return {version for (name, version) in self.sent if name == api}

    def count(self, api: str) -> int:
        return sum(n for (name, _), n in self.sent.items() if name == api)

    def epochs(self, api: str) -> list[int]:
        return [epoch for name, epoch in self.answered_epochs if name == api]

    @classmethod
    def parse(cls, log: Path) -> ProducerRequests:
        sent: Counter[tuple[str, int]] = Counter()
        epochs: list[tuple[str, int]] = []
        tv2: list[str] = []
        for line in log.read_text(errors="replace").splitlines():
            if found := SENT.search(line):
                sent[found["api"], int(found["version"])] += 1
            elif (found := EPOCH_ANSWER.search(line)) and found["error"] == "0":
                epochs.append((found["api"], int(found["epoch"])))
            elif "Updating isTV2 enabled to" in line:
                tv2.append(line)
        return cls(sent, epochs, tv2)


class TransactionalCopier:
    """org.apache.kafka.tools.TransactionalMessageCopier in its own JVM: a read_committed
    consumer in a group, a transactional producer copying every batch it polls into the same
    partition of the output topic, the consumer's offsets sent with the transaction, and one
    transaction in three aborted (its input read again). It exits once nothing is left.

    ``lib``: the jars, Kafka 3.9's (kafka_lib(), reload4j) by default, or Kafka 4's
    (kafka4_lib(): log4j 2, whose configuration also logs the clients' requests to
    ``requests_log``, see :meth:`requests`)."""

    def __init__(
        self,
        bootstrap: str,
        source: str,
        output: str,
        *,
        group: str,
        transactional_id: str,
        messages: int,
        log_dir: Path,
        lib: Path | None = None,
    ) -> None:
        java = shutil.which("java")
        assert java is not None, "java is not on PATH"
        lib = kafka_lib() if lib is None else lib
        self.requests_log = log_dir / f"copier-{transactional_id}-requests.log"
        self.log4j2 = any(lib.glob("log4j-core-2*.jar"))
        logging = (
            f"-Dlog4j2.configurationFile={quiet_log4j2(log_dir, self.requests_log)}"
            if self.log4j2
            else f"-Dlog4j.configuration=file:{quiet_log4j(log_dir)}"
        )
        self.command = [
            java, "-Xmx192m", "-XX:TieredStopAtLevel=1", "-cp", f"{lib}/*", logging,
            "org.apache.kafka.tools.TransactionalMessageCopier",
            "--broker-list", bootstrap, "--input-topic", source, "--input-partition", "0",
            "--output-topic", output, "--consumer-group", group,
            "--transactional-id", transactional_id, "--max-messages", str(messages),
            "--transaction-size", "10", "--group-mode", "--use-group-metadata",
            "--enable-random-aborts",
        ]  # fmt: skip
        self.log = log_dir / f"copier-{transactional_id}.log"

    def run(self) -> list[dict[str, Any]]:
        """Run to the end; the status lines it printed."""
        with self.log.open("wb") as stderr:
            done = subprocess.run(
                self.command,
                stdout=subprocess.PIPE,
                stderr=stderr,
                timeout=COPIER_TIMEOUT_S,
                check=False,
            )
        statuses = [json.loads(line) for line in done.stdout.splitlines() if line.startswith(b"{")]
        assert done.returncode == 0, f"the copier failed ({self.log}): {statuses[-3:]}"
        return statuses

    def requests(self) -> ProducerRequests:
        """What its producer sent (Kafka 4's jars only: the 3.9 client logs no requests)."""
        assert self.log4j2, "the requests are logged by the log4j 2 configuration only"
        return ProducerRequests.parse(self.requests_log)
