"""Play a :class:`~eoslab.probe.txn_flows.TxnFlow` against a target, and diff two plays.

The probe connects to the partition's leader (Metadata), to the coordinator of each of the
flow's transactional ids (FindCoordinator with the transaction key type, asked again while a
fresh Kafka cluster creates __transaction_state) and, when the flow commits offsets, to its
group's coordinator. Transactional ids and the group are fresh for every play. Every request and
answer goes into :attr:`TxnFlowRun.exchanges` with what the diff compares in its ``detail``:
epochs, offsets (the topic is fresh, so offsets start at 0 on both targets), what a fetch
returned (data records, markers, aborted transactions by producer), transaction states.
Answers that only say "not ready yet" (the coordinator loading) are asked again and not
recorded. Kafka answers EndTxn once PrepareCommit/PrepareAbort is in its log and writes the
markers afterwards (the reference broker before answering: a listed difference), so after an
EndTxn the probe waits, unrecorded, until DescribeTransactions says the transaction is
complete, as a client reading later would find it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eoslab.admin import find_leader
from eoslab.clock import now_ms, wait_until
from eoslab.kafka_api import error_name
from eoslab.probe.batches import read_batches, record_batch
from eoslab.probe.client import KafkaProtocolClient
from eoslab.probe.diff import FlowDiff, diff_transcripts, group_observations
from eoslab.probe.group_runner import CLIENT_ID, find_coordinator
from eoslab.probe.requests import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    add_offsets_to_txn_request,
    add_partitions_to_txn_request,
    describe_transactions_request,
    end_txn_request,
    fetch_request,
    find_transaction_coordinator_request,
    init_producer_id_request,
    init_transactional_producer_request,
    list_offsets_request,
    offset_fetch_request,
    produce_request,
    txn_offset_commit_request,
)
from eoslab.probe.runner import (
    INIT_PRODUCER_ID_TIMEOUT_S,
    LEADER_LOOKUP_INTERVAL_S,
    NOT_READY,
    ProbeError,
)
from eoslab.probe.targets import fresh_topic, lab_target
from eoslab.probe.transcript import NONE, Exchange, flow_run_json
from eoslab.probe.txn_flows import (
    Add,
    AddOffsets,
    CommitOffsets,
    Describe,
    End,
    Fetch,
    FetchOffsets,
    Init,
    ListOffsets,
    Produce,
    Sleep,
    TxnFlow,
)
from eoslab.runtime.topology import LabConfig

PARTITION = 0
CONCURRENT = "CONCURRENT_TRANSACTIONS"
COMPLETE = frozenset({"CompleteCommit", "CompleteAbort"})


@dataclass
class ProducerState:
    """What one producer was given, and the connection to its transactional id's coordinator."""

    coordinator: KafkaProtocolClient
    transactional_id: str | None
    label: str | None
    """The flow's name for the transactional id (what the transcript shows)."""
    producer_id: int = -1
    epoch: int = -1
    sequence: int = 0


@dataclass
class TxnFlowRun:
    flow: TxnFlow
    target: str
    topic: str
    group: str
    leader: str | None = None
    exchanges: list[Exchange] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return flow_run_json(self)


def run_txn_flow(flow: TxnFlow, bootstrap: str, target: str, topic: str) -> TxnFlowRun:
    """Play ``flow`` on partition 0 of ``topic`` with fresh transactional ids and group."""
    suffix = uuid.uuid4().hex[:8]
    run = TxnFlowRun(flow, target, topic, group=f"probe-{flow.name}-{suffix}")
    leader = find_leader(bootstrap, topic, PARTITION)
    run.leader = f"{leader.host}:{leader.port}"
    player = _Player(run, bootstrap, suffix, KafkaProtocolClient(leader.host, leader.port))
    try:
        for index, step in enumerate(flow.steps):
            player.play(index, step)
    finally:
        player.close()
    return run


def run_txn_flow_on_lab(flow: TxnFlow, target_name: str, config: LabConfig) -> TxnFlowRun:
    """Play a transaction flow on a fresh topic of one of the lab's targets."""
    target = lab_target(target_name, config)
    return run_txn_flow(flow, target.bootstrap, target.name, fresh_topic(flow, target))


def diff_txn_runs(
    kafka: TxnFlowRun, refbroker: TxnFlowRun, kafka4: TxnFlowRun | None = None
) -> FlowDiff:
    """Every difference between the complete transcripts of one transaction flow: each
    exchange's error and everything in its detail."""
    return diff_transcripts(
        kafka, refbroker, kafka4, lambda run: run.exchanges, lambda _run: group_observations
    )


def diff_txn_on_lab(flow: TxnFlow, config: LabConfig) -> FlowDiff:
    """Play ``flow`` on Kafka 3.9, the reference broker and, when the lab runs it, Kafka 4."""
    return diff_txn_runs(
        run_txn_flow_on_lab(flow, "kafka", config),
        run_txn_flow_on_lab(flow, "refbroker", config),
        run_txn_flow_on_lab(flow, "kafka4", config) if "kafka4" in config.targets else None,
    )


def find_transaction_coordinator(bootstrap: str, transactional_id: str) -> tuple[str, int]:
    """The coordinator's address, asked again while a fresh cluster creates
    __transaction_state (COORDINATOR_NOT_AVAILABLE)."""
    coordinator = _transaction_coordinator(bootstrap, transactional_id)
    return coordinator.host, int(coordinator.port)


def transaction_coordinator_id(bootstrap: str, transactional_id: str) -> int:
    """The broker id coordinating ``transactional_id`` now (FindCoordinator, key type 1)."""
    return int(_transaction_coordinator(bootstrap, transactional_id).node_id)


def _transaction_coordinator(bootstrap: str, transactional_id: str) -> Any:
    """FindCoordinator's answer for ``transactional_id``, asked until one is available."""
    host, port = bootstrap.split(",", maxsplit=1)[0].rsplit(":", 1)
    last = [NONE]

    def found() -> Any:
        with KafkaProtocolClient(host, int(port), client_id=CLIENT_ID) as client:
            request = find_transaction_coordinator_request(transactional_id)
            (coordinator,) = client.request(request).coordinators
        last[0] = error_name(coordinator.error_code)
        if last[0] not in (NONE, *NOT_READY):
            raise ProbeError(f"no coordinator for transactional id {transactional_id}: {last[0]}")
        return coordinator if last[0] == NONE else None

    coordinator = wait_until(found, INIT_PRODUCER_ID_TIMEOUT_S, LEADER_LOOKUP_INTERVAL_S)
    if coordinator is None:
        raise ProbeError(f"no coordinator for transactional id {transactional_id}: {last[0]}")
    return coordinator


@dataclass
class _Player:
    run: TxnFlowRun
    bootstrap: str
    suffix: str
    leader: KafkaProtocolClient
    producers: dict[str, ProducerState] = field(default_factory=dict)
    group_coordinator: KafkaProtocolClient | None = None
    index: int = 0

    def close(self) -> None:
        self.leader.close()
        for producer in self.producers.values():
            producer.coordinator.close()
        if self.group_coordinator is not None:
            self.group_coordinator.close()

    def play(self, index: int, step: Any) -> None:
        self.index = index
        topic = self.run.topic
        request: Any
        match step:
            case Init():
                self._init(step)
            case Add(producer=name):
                p = self.producers[name]
                request = add_partitions_to_txn_request(
                    self._tid(p), p.producer_id, p.epoch, topic, (PARTITION,)
                )
                self._request(
                    p.coordinator,
                    name,
                    request,
                    lambda r: (
                        r.results_by_topic_v3_and_below[0]
                        .results_by_partition[0]
                        .partition_error_code
                    ),
                )
            case AddOffsets(producer=name):
                p = self.producers[name]
                request = add_offsets_to_txn_request(
                    self._tid(p), p.producer_id, p.epoch, self.run.group
                )
                self._request(p.coordinator, name, request, lambda r: r.error_code)
            case Produce(producer=name, records=count):
                self._produce(name, count)
            case CommitOffsets(producer=name, offset=offset):
                p = self.producers[name]
                request = txn_offset_commit_request(
                    self._tid(p),
                    self.run.group,
                    p.producer_id,
                    p.epoch,
                    topic=topic,
                    partition=PARTITION,
                    offset=offset,
                )
                self._request(
                    self._group(), name, request, lambda r: r.topics[0].partitions[0].error_code
                )
            case End(producer=name, commit=commit):
                p = self.producers[name]
                request = end_txn_request(self._tid(p), p.producer_id, p.epoch, commit=commit)
                exchange, _ = self._request(p.coordinator, name, request, lambda r: r.error_code)
                if exchange.error == NONE:
                    self._await_complete(p)
            case ListOffsets(committed=committed):
                isolation = READ_COMMITTED if committed else READ_UNCOMMITTED
                exchange, response = self._request(
                    self.leader,
                    None,
                    list_offsets_request(topic, PARTITION, isolation),
                    lambda r: r.topics[0].partitions[0].error_code,
                )
                exchange.detail = {
                    "committed": committed,
                    "offset": int(response.topics[0].partitions[0].offset),
                }
            case Fetch(committed=committed):
                self._fetch(committed)
            case FetchOffsets(stable=stable):
                request = offset_fetch_request(
                    self.run.group, topic, (PARTITION,), require_stable=stable
                )
                exchange, response = self._request(
                    self._group(), None, request, lambda r: r.groups[0].error_code
                )
                (answer,) = response.groups[0].topics[0].partitions
                exchange.detail = {
                    "stable": stable,
                    "offset": int(answer.committed_offset),
                    "partition_error": error_name(answer.error_code),
                }
            case Describe(producer=name):
                p = self.producers[name]
                exchange, response = self._request(
                    p.coordinator,
                    name,
                    describe_transactions_request(self._tid(p)),
                    lambda r: r.transaction_states[0].error_code,
                )
                (state,) = response.transaction_states
                exchange.detail = {
                    "state": state.transaction_state,
                    "epoch": int(state.producer_epoch),
                    "partitions": sorted(
                        (t.topic == topic, list(t.partitions)) for t in state.topics
                    ),
                }
            case Sleep(ms=ms):
                time.sleep(ms / 1000)

    def _tid(self, producer: ProducerState) -> str:
        if producer.transactional_id is None:
            raise ProbeError(f"step {self.index}: an idempotent producer has no transaction")
        return producer.transactional_id

    def _init(self, step: Init) -> None:
        name = step.producer
        tid = None if step.txn is None else f"probe-{self.run.flow.name}-{self.suffix}-{step.txn}"
        if name not in self.producers:
            host, port = (
                self.leader_address()
                if tid is None
                else find_transaction_coordinator(self.bootstrap, tid)
            )
            self.producers[name] = ProducerState(
                KafkaProtocolClient(host, port, client_id=CLIENT_ID), tid, step.txn
            )
        producer = self.producers[name]
        if tid is None:
            request = init_producer_id_request()
        elif step.recover:
            request = init_transactional_producer_request(
                tid, step.timeout_ms, producer.producer_id, producer.epoch
            )
        else:
            request = init_transactional_producer_request(tid, step.timeout_ms)
        retried = {*NOT_READY, *((CONCURRENT,) if step.until_ready else ())}
        exchange = self._exchange("InitProducerId", name)
        granted = [-1, -1]

        def answered() -> bool:
            response = producer.coordinator.request(request)
            exchange.answered_ms = now_ms()
            exchange.error = error_name(response.error_code)
            granted[:] = int(response.producer_id), int(response.producer_epoch)
            return exchange.error not in retried

        if not wait_until(answered, INIT_PRODUCER_ID_TIMEOUT_S, LEADER_LOOKUP_INTERVAL_S):
            raise ProbeError(f"InitProducerId not answered: {exchange.error}")
        exchange.producer_id, exchange.epoch = granted
        exchange.detail = {"epoch": exchange.epoch}
        if exchange.error == NONE:
            producer.producer_id, producer.epoch = granted
            producer.sequence = 0

    def _await_complete(self, producer: ProducerState) -> None:
        """Until the coordinator has written every marker of the transaction just ended."""
        request = describe_transactions_request(self._tid(producer))
        state = [""]

        def complete() -> bool:
            (described,) = producer.coordinator.request(request).transaction_states
            state[0] = described.transaction_state
            return state[0] in COMPLETE

        if not wait_until(complete, INIT_PRODUCER_ID_TIMEOUT_S, LEADER_LOOKUP_INTERVAL_S):
            raise ProbeError(f"step {self.index}: the transaction stays {state[0]}")

    def leader_address(self) -> tuple[str, int]:
        assert self.run.leader is not None
        host, port = self.run.leader.rsplit(":", 1)
        return host, int(port)

    def _produce(self, name: str, count: int) -> None:
        p = self.producers[name]
        values = [f"{name}/{p.sequence + n}".encode() for n in range(count)]
        batch = record_batch(
            p.producer_id,
            p.epoch,
            p.sequence,
            values,
            transactional=p.transactional_id is not None,
        )
        exchange = self._exchange("Produce", name)
        exchange.producer_id, exchange.epoch = p.producer_id, p.epoch
        exchange.base_sequence, exchange.record_count = p.sequence, count
        request = produce_request(
            self.run.topic, PARTITION, batch, transactional_id=p.transactional_id
        )
        response = self.leader.request(request)
        answer = response.responses[0].partition_responses[0]
        exchange.answered_ms = now_ms()
        exchange.error = error_name(answer.error_code)
        exchange.base_offset = int(answer.base_offset)
        exchange.detail = {"offset": exchange.base_offset}
        if exchange.error == NONE:
            p.sequence += count

    def _fetch(self, committed: bool) -> None:
        isolation = READ_COMMITTED if committed else READ_UNCOMMITTED
        exchange, response = self._request(
            self.leader,
            None,
            fetch_request(self.run.topic, PARTITION, 0, isolation_level=isolation),
            lambda r: r.responses[0].partitions[0].error_code,
        )
        answer = response.responses[0].partitions[0]
        batches = read_batches(bytes(answer.records or b""))
        labels = {p.producer_id: p.label for p in self.producers.values()}
        aborted = answer.aborted_transactions
        exchange.detail = {
            "committed": committed,
            "records": sum(len(b.records) for b in batches if not b.attributes & 0x20),
            "markers": sum(1 for b in batches if b.attributes & 0x20),
            "aborted": None
            if aborted is None
            else [[labels.get(int(a.producer_id), "?"), int(a.first_offset)] for a in aborted],
            "last_stable_offset": int(answer.last_stable_offset),
            "high_watermark": int(answer.high_watermark),
        }

    def _group(self) -> KafkaProtocolClient:
        if self.group_coordinator is None:
            host, port = find_coordinator(self.bootstrap, self.run.group)
            self.group_coordinator = KafkaProtocolClient(host, port, client_id=CLIENT_ID)
        return self.group_coordinator

    def _exchange(self, api: str, name: str | None) -> Exchange:
        exchange = Exchange(step=self.index, api=api, sent_ms=now_ms(), tag=name)
        self.run.exchanges.append(exchange)
        return exchange

    def _request(
        self,
        client: KafkaProtocolClient,
        name: str | None,
        request: Any,
        error_of: Callable[[Any], Any],
    ) -> tuple[Exchange, Any]:
        exchange = self._exchange(request.__class__.__name__.removesuffix("Request"), name)
        response = client.request(request)
        exchange.answered_ms = now_ms()
        exchange.error = error_name(error_of(response))
        return exchange, response
