"""The lab's targets as probe targets, and flows played (and diffed) on fresh topics of them.

Each target has its own way of losing producer state. Kafka (3.9 and 4) has no "forget this
producer" request: DeleteRecords past the producer's batches is what made Kafka 2.0 forget it
(the log start offset moved past its last batch). The reference broker's control API removes
the state directly (``expire-producers``), as producer-id expiry would after
``producer.id.expiration.ms``.
"""

from __future__ import annotations

import secrets

from eoslab.admin import create_topic
from eoslab.clock import now_ms
from eoslab.kafka_api import error_name
from eoslab.probe.client import KafkaProtocolClient
from eoslab.probe.diff import FlowDiff, diff_group_runs, diff_runs
from eoslab.probe.flows import Flow
from eoslab.probe.group_flows import GroupFlow
from eoslab.probe.group_runner import GroupFlowRun, run_group_flow
from eoslab.probe.requests import delete_records_request
from eoslab.probe.runner import FlowRun, ProbeTarget, StateRemover, run_flow
from eoslab.probe.transcript import NONE, Exchange
from eoslab.probe.txn_flows import TxnFlow
from eoslab.refbroker.control_client import RefbrokerControl
from eoslab.rundir import KAFKA_TARGETS, LAB_TARGETS, REPLICATION
from eoslab.runtime.topology import LabConfig


def delete_records(
    client: KafkaProtocolClient, topic: str, partition: int, producer_id: int
) -> Exchange:
    """DeleteRecords up to the high watermark, on the leader's connection."""
    exchange = Exchange(step=-1, api="DeleteRecords", sent_ms=now_ms(), producer_id=producer_id)
    response = client.request(delete_records_request(topic, partition))
    answer = response.topics[0].partitions[0]
    exchange.answered_ms = now_ms()
    exchange.error = error_name(answer.error_code)
    exchange.detail = {"low_watermark": int(answer.low_watermark)}
    return exchange


def expire_producers(control: RefbrokerControl) -> StateRemover:
    """The reference broker's ``expire-producers`` fault for the probe's producer id."""

    def remove(
        client: KafkaProtocolClient, topic: str, partition: int, producer_id: int
    ) -> Exchange:
        del client, topic, partition  # the control API removes the state on every partition
        exchange = Exchange(
            step=-1, api="control:expire-producers", sent_ms=now_ms(), producer_id=producer_id
        )
        applied = control.apply({"kind": "expire-producers", "producer_id": producer_id})
        exchange.answered_ms = now_ms()
        exchange.error = NONE
        exchange.detail = {"removed": applied.get("removed")}
        return exchange

    return remove


def kafka_target(bootstrap: str, name: str = "kafka") -> ProbeTarget:
    return ProbeTarget(name, bootstrap, delete_records)


def refbroker_target(bootstrap: str, control_url: str) -> ProbeTarget:
    return ProbeTarget("refbroker", bootstrap, expire_producers(RefbrokerControl(control_url)))


def lab_target(name: str, config: LabConfig) -> ProbeTarget:
    """``kafka``, ``kafka4`` or ``refbroker`` of a running lab."""
    if name in KAFKA_TARGETS:
        return kafka_target(config.bootstrap(name), name)
    if name == "refbroker":
        return refbroker_target(config.refbroker_bootstrap, config.refbroker_control_url)
    raise ValueError(f"unknown target {name!r}; choose one of: {', '.join(LAB_TARGETS)}")


def fresh_topic(flow: Flow | GroupFlow | TxnFlow, target: ProbeTarget, partitions: int = 1) -> str:
    """A new topic for one flow run (RF 3 on Kafka, 1 on the reference broker)."""
    topic = f"probe-{flow.name}-{target.name}-{secrets.token_hex(3)}"
    create_topic(target.bootstrap, topic, partitions, REPLICATION[target.name])
    return topic


def run_on_lab(flow: Flow, target_name: str, config: LabConfig) -> FlowRun:
    """Play ``flow`` on a fresh topic of one of the lab's targets."""
    target = lab_target(target_name, config)
    return run_flow(flow, target, fresh_topic(flow, target))


def run_group_flow_on_lab(flow: GroupFlow, target_name: str, config: LabConfig) -> GroupFlowRun:
    """Play a group flow with a fresh group on a fresh topic of one of the lab's targets."""
    target = lab_target(target_name, config)
    topic = fresh_topic(flow, target, flow.partitions)
    return run_group_flow(flow, target.bootstrap, target.name, topic)


def diff_on_lab(flow: Flow | GroupFlow, config: LabConfig) -> FlowDiff:
    """Play ``flow`` on Kafka 3.9, the reference broker and, when the lab runs it, Kafka 4, each
    on a fresh topic, and compare the transcripts (a transaction flow: ``diff_flow_on_lab``)."""
    if not isinstance(flow, Flow | GroupFlow):  # the produce runner would play only its first step
        raise TypeError(f"{flow.name}: a {type(flow).__name__} is diffed by diff_flow_on_lab")
    three_way = "kafka4" in config.targets
    if isinstance(flow, GroupFlow):
        return diff_group_runs(
            run_group_flow_on_lab(flow, "kafka", config),
            run_group_flow_on_lab(flow, "refbroker", config),
            run_group_flow_on_lab(flow, "kafka4", config) if three_way else None,
        )
    return diff_runs(
        run_on_lab(flow, "kafka", config),
        run_on_lab(flow, "refbroker", config),
        run_on_lab(flow, "kafka4", config) if three_way else None,
    )
