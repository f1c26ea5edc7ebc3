"""Play a :class:`~eoslab.probe.flows.Flow` against a target's partition leader.

The probe finds the leader from Metadata (on the 3-broker cluster it may be any broker) and
connects to the address the leader advertises, gets a real producer id with InitProducerId,
then sends the flow's crafted Produce requests with explicit producer id, epoch and sequence,
pipelined on one connection. Every request and answer goes into :attr:`FlowRun.exchanges`.
Records are v1 workload messages (:mod:`eoslab.message`), so the checker reads them like the
workload's own.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eoslab.admin import find_leader
from eoslab.clock import now_ms, wait_until
from eoslab.kafka_api import error_name
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
    produce_request,
)
from eoslab.probe.transcript import NONE, Exchange

PROBE_PRODUCER = 1000
"""The probe's producer index in messages and history (the workload's are 0..P-1)."""
LEADER_LOOKUP_TIMEOUT_S = 30.0
LEADER_LOOKUP_INTERVAL_S = 0.2
INIT_PRODUCER_ID_TIMEOUT_S = 30.0
NOT_READY = frozenset(
    {"COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"}
)
"""Coordinator errors (InitProducerId, FindCoordinator, group requests) that say "ask again
shortly"."""

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
) -> FlowRun:
    return FlowRun(
        flow=flow,
        target=target.name,
        topic=topic,
        partition=partition,
        run_id=run_id or f"probe-{flow.name}-{target.name}",
        session_id=uuid.uuid4().hex,
    )


def run_flow(flow: Flow, target: ProbeTarget, topic: str) -> FlowRun:
    """Play ``flow`` on partition 0 of ``topic`` as a fresh run, and return the run."""
    run = new_flow_run(flow, target, topic)
    play(run, target)
    return run


def play(run: FlowRun, target: ProbeTarget) -> None:
    """Play the run's flow; the transcript holds everything up to the point of a failure."""
    sent_ms = now_ms()
    leader = find_leader(target.bootstrap, run.topic, run.partition)
    host, port = leader.host, leader.port
    run.leader = f"{host}:{port}"
    run.exchanges.append(
        Exchange(
            step=-1,
            api="Metadata",
            sent_ms=sent_ms,
            error=NONE,
            answered_ms=now_ms(),
            detail={"leader": leader.broker_id, "address": run.leader},
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


def _wait_until_leading(run: FlowRun, client: KafkaProtocolClient) -> None:
    """Poll the leader until it serves the partition: metadata may name a leader a moment
    before that broker has taken the partition on (it answers UNKNOWN_TOPIC_OR_PARTITION or
    NOT_LEADER_OR_FOLLOWER meanwhile), and a refused first batch would spoil the flow."""
    answer = [NONE]

    def serving() -> bool:
        response = client.request(describe_producers_request(run.topic, run.partition))
        answer[0] = error_name(response.topics[0].partitions[0].error_code)
        return answer[0] == NONE

    if not wait_until(serving, LEADER_LOOKUP_TIMEOUT_S, LEADER_LOOKUP_INTERVAL_S):
        raise ProbeError(
            f"leader {run.leader} does not serve {run.topic}[{run.partition}]: {answer[0]}"
        )


def _init_producer_id(run: FlowRun, client: KafkaProtocolClient) -> None:
    """A producer id, asked again while the broker says it is not ready yet (a fresh cluster
    answers COORDINATOR_LOAD_IN_PROGRESS until its producer-id manager has a block)."""

    def granted() -> bool:
        exchange = Exchange(step=-1, api="InitProducerId", sent_ms=now_ms())
        run.exchanges.append(exchange)
        response = client.request(init_producer_id_request())
        exchange.answered_ms = now_ms()
        exchange.error = error_name(response.error_code)
        exchange.producer_id = int(response.producer_id)
        exchange.epoch = int(response.producer_epoch)
        if exchange.error == NONE:
            run.producer_id, run.epoch = exchange.producer_id, exchange.epoch
            return True
        if exchange.error not in NOT_READY:
            raise ProbeError(f"InitProducerId refused: {exchange.error}")
        return False

    if not wait_until(granted, INIT_PRODUCER_ID_TIMEOUT_S, LEADER_LOOKUP_INTERVAL_S):
        raise ProbeError(f"InitProducerId refused: {run.exchanges[-1].error}")


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
