"""Play a :class:`~eoslab.probe.flows.Flow` against a target's partition leader.

The probe finds the leader from Metadata (on the 3-broker cluster it may be any broker) and
connects to the address the leader advertises, gets a real producer id with InitProducerId,
then sends the flow's crafted Produce requests with explicit producer id, epoch and sequence,
pipelined on one connection. Every request and answer goes into :attr:`FlowRun.exchanges`.
Records are v1 workload messages (:mod:`eoslab.message`), so the checker reads them like the
workload's own.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eoslab.message import Message, encode_key, encode_value
from eoslab.probe.batches import record_batch
from eoslab.probe.client import KafkaProtocolClient
from eoslab.probe.flows import (
    DescribeProducers,
    Flow,
    Receive,
    Reconnect,
    RemoveProducerState,
    Send,
)
from eoslab.probe.requests import (
    describe_producers_request,
    init_producer_id_request,
    metadata_request,
    produce_request,
)
from eoslab.probe.transcript import NONE, Exchange, error_name
from eoslab.rundir import now_ms

PROBE_PRODUCER = 1000
"""The probe's producer index in messages and history (the workload's are 0..P-1)."""
LEADER_LOOKUP_TIMEOUT_S = 30.0
LEADER_LOOKUP_INTERVAL_S = 0.2
INIT_PRODUCER_ID_TIMEOUT_S = 30.0
NOT_READY = frozenset(
    {"COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"}
)
"""InitProducerId errors that say "ask again shortly"."""

StateRemover = Callable[[KafkaProtocolClient, str, int, int], Exchange]
"""(leader connection, topic, partition, producer id) -> the exchange that removed the
producer's state (its ``step`` is filled in by the runner)."""


class ProbeError(RuntimeError):
    """The flow could not be played (no leader, a refused InitProducerId, ...)."""


@dataclass(frozen=True)
class ProbeTarget:
    """Where a probe runs: a bootstrap address and how this target loses producer state."""

    name: str
    bootstrap: str
    remove_producer_state: StateRemover | None = None


@dataclass
class FlowRun:
    """One flow played on one target: its identity, its messages and its transcript."""

    flow: Flow
    target: str
    topic: str
    partition: int
    run_id: str
    session_id: str
    producer: int = PROBE_PRODUCER
    producer_id: int | None = None
    epoch: int | None = None
    leader: str | None = None
    exchanges: list[Exchange] = field(default_factory=list)

    def messages(self, tag: str) -> list[Message]:
        """The records of group ``tag``: message sequences follow the flow's group order."""
        first = 0
        for group in self.flow.records:
            if group.tag == tag:
                return [
                    Message(
                        run_id=self.run_id,
                        session_id=self.session_id,
                        producer=self.producer,
                        partition=self.partition,
                        seq=first + index,
                        key=tag,
                        key_seq=index,
                    )
                    for index in range(group.count)
                ]
            first += group.count
        raise KeyError(tag)

    def produced(self) -> list[Exchange]:
        return [e for e in self.exchanges if e.api == "Produce"]

    def as_json(self) -> dict[str, Any]:
        return {
            "flow": self.flow.name,
            "target": self.target,
            "topic": self.topic,
            "partition": self.partition,
            "run_id": self.run_id,
            "session_id": self.session_id,
            "producer_id": self.producer_id,
            "epoch": self.epoch,
            "leader": self.leader,
            "exchanges": [e.as_json() for e in self.exchanges],
        }


def new_flow_run(
    flow: Flow,
    target: ProbeTarget,
    topic: str,
    partition: int = 0,
    *,
    run_id: str | None = None,
    session_id: str | None = None,
) -> FlowRun:
    return FlowRun(
        flow=flow,
        target=target.name,
        topic=topic,
        partition=partition,
        run_id=run_id or f"probe-{flow.name}-{target.name}",
        session_id=session_id or uuid.uuid4().hex,
    )


def run_flow(
    flow: Flow,
    target: ProbeTarget,
    topic: str,
    partition: int = 0,
    *,
    run_id: str | None = None,
    session_id: str | None = None,
) -> FlowRun:
    """Play ``flow`` on a fresh :class:`FlowRun` and return it."""
    run = new_flow_run(flow, target, topic, partition, run_id=run_id, session_id=session_id)
    play(run, target)
    return run


def play(run: FlowRun, target: ProbeTarget) -> None:
    """Play the run's flow; the transcript holds everything up to the point of a failure."""
    sent_ms = now_ms()
    node_id, host, port = find_leader(target.bootstrap, run.topic, run.partition)
    run.leader = f"{host}:{port}"
    run.exchanges.append(
        Exchange(
            step=-1,
            api="Metadata",
            sent_ms=sent_ms,
            error=NONE,
            answered_ms=now_ms(),
            detail={"leader": node_id, "address": run.leader},
        )
    )
    client = KafkaProtocolClient(host, port)
    try:
        _wait_until_leading(run, client)
        _init_producer_id(run, client)
        pending: list[Exchange] = []
        for index, step in enumerate(run.flow.steps):
            match step:
                case Send():
                    pending.append(_send(run, client, index, step))
                case Receive(count=count, lost=lost):
                    for _ in range(count):
                        _receive(client, pending.pop(0), lost)
                case Reconnect():
                    client.close()
                    pending.clear()
                    client = KafkaProtocolClient(host, port)
                case RemoveProducerState():
                    if target.remove_producer_state is None:
                        raise ProbeError(f"target {target.name} cannot remove producer state")
                    assert run.producer_id is not None
                    removal = target.remove_producer_state(
                        client, run.topic, run.partition, run.producer_id
                    )
                    removal.step = index
                    run.exchanges.append(removal)
                case DescribeProducers():
                    run.exchanges.append(_describe_producers(run, client, index))
    finally:
        client.close()


def find_leader(bootstrap: str, topic: str, partition: int) -> tuple[int, str, int]:
    """(node id, host, port) the partition's leader advertises, polled until it has one."""
    addresses = [address.rsplit(":", 1) for address in bootstrap.split(",")]
    deadline = time.monotonic() + LEADER_LOOKUP_TIMEOUT_S
    last_problem = "no answer"
    while time.monotonic() < deadline:
        for host, port in addresses:
            try:
                with KafkaProtocolClient(host, int(port)) as client:
                    metadata = client.request(metadata_request(topic))
            except OSError as error:
                last_problem = f"{host}:{port}: {error}"
                continue
            leader = _leader_of(metadata, topic, partition)
            if isinstance(leader, str):
                last_problem = leader
                continue
            return leader
        time.sleep(LEADER_LOOKUP_INTERVAL_S)
    raise ProbeError(
        f"no leader for {topic}[{partition}] after {LEADER_LOOKUP_TIMEOUT_S} s: {last_problem}"
    )


def _leader_of(metadata: Any, topic: str, partition: int) -> tuple[int, str, int] | str:
    """(leader id, host, port), or why there is none yet."""
    brokers = {broker.node_id: (broker.host, int(broker.port)) for broker in metadata.brokers}
    for described in metadata.topics:
        if described.name != topic:
            continue
        if error_name(described.error_code) != NONE:
            return f"topic {topic}: {error_name(described.error_code)}"
        for candidate in described.partitions:
            if candidate.partition_index == partition and candidate.leader_id in brokers:
                return int(candidate.leader_id), *brokers[candidate.leader_id]
    return f"{topic}[{partition}] has no leader yet"


def _wait_until_leading(run: FlowRun, client: KafkaProtocolClient) -> None:
    """Poll the leader until it serves the partition: metadata may name a leader a moment
    before that broker has taken the partition on (it answers UNKNOWN_TOPIC_OR_PARTITION or
    NOT_LEADER_OR_FOLLOWER meanwhile), and a refused first batch would spoil the flow."""
    deadline = time.monotonic() + LEADER_LOOKUP_TIMEOUT_S
    while True:
        response = client.request(describe_producers_request(run.topic, run.partition))
        error = error_name(response.topics[0].partitions[0].error_code)
        if error == NONE:
            return
        if time.monotonic() > deadline:
            raise ProbeError(
                f"leader {run.leader} does not serve {run.topic}[{run.partition}]: {error}"
            )
        time.sleep(LEADER_LOOKUP_INTERVAL_S)


def _init_producer_id(run: FlowRun, client: KafkaProtocolClient) -> None:
    """A producer id, asked again while the broker says it is not ready yet (a fresh cluster
    answers COORDINATOR_LOAD_IN_PROGRESS until its producer-id manager has a block)."""
    deadline = time.monotonic() + INIT_PRODUCER_ID_TIMEOUT_S
    while True:
        exchange = Exchange(step=-1, api="InitProducerId", sent_ms=now_ms())
        run.exchanges.append(exchange)
        response = client.request(init_producer_id_request())
        exchange.answered_ms = now_ms()
        exchange.error = error_name(response.error_code)
        exchange.producer_id = int(response.producer_id)
        exchange.epoch = int(response.producer_epoch)
        if exchange.error == NONE:
            run.producer_id, run.epoch = exchange.producer_id, exchange.epoch
            return
        if exchange.error not in NOT_READY or time.monotonic() > deadline:
            raise ProbeError(f"InitProducerId refused: {exchange.error}")
        time.sleep(LEADER_LOOKUP_INTERVAL_S)


def _send(run: FlowRun, client: KafkaProtocolClient, index: int, step: Send) -> Exchange:
    assert run.producer_id is not None
    assert run.epoch is not None
    group = run.flow.group(step.tag)
    messages = run.messages(step.tag)
    base_sequence = group.first_sequence if step.sequence is None else step.sequence
    epoch = run.epoch + step.epoch_bump
    batch = record_batch(
        run.producer_id,
        epoch,
        base_sequence,
        [encode_value(m) for m in messages],
        keys=[encode_key(m) for m in messages],
    )
    exchange = Exchange(
        step=index,
        api="Produce",
        sent_ms=now_ms(),
        tag=step.tag,
        producer_id=run.producer_id,
        epoch=epoch,
        base_sequence=base_sequence,
        record_count=group.count,
    )
    run.exchanges.append(exchange)
    client.send(produce_request(run.topic, run.partition, batch))
    return exchange


def _receive(client: KafkaProtocolClient, exchange: Exchange, lost: bool) -> None:
    response = client.receive()
    answer = response.responses[0].partition_responses[0]
    exchange.answered_ms = now_ms()
    exchange.error = error_name(answer.error_code)
    exchange.base_offset = int(answer.base_offset)
    exchange.ack_lost = lost


def _describe_producers(run: FlowRun, client: KafkaProtocolClient, index: int) -> Exchange:
    exchange = Exchange(step=index, api="DescribeProducers", sent_ms=now_ms())
    response = client.request(describe_producers_request(run.topic, run.partition))
    answer = response.topics[0].partitions[0]
    exchange.answered_ms = now_ms()
    exchange.error = error_name(answer.error_code)
    exchange.producer_id = run.producer_id
    mine = [p for p in answer.active_producers if p.producer_id == run.producer_id]
    exchange.detail = {
        "tracked": bool(mine),
        "last_sequence": int(mine[0].last_sequence) if mine else None,
        "producer_epoch": int(mine[0].producer_epoch) if mine else None,
    }
    return exchange
