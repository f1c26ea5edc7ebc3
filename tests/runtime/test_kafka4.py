"""The lab's Kafka 4: three KRaft nodes (broker and quorum voter each) in the session lab, as the
runtime starts, checks, reports and breaks them."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from eoslab.admin import (
    MetadataQuorum,
    cluster_controller,
    create_topic,
    metadata_brokers,
    metadata_quorum,
)
from eoslab.clock import wait_until
from eoslab.orchestration import steps
from eoslab.runtime import smoke
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.processes import processes_of
from eoslab.runtime.topology import KAFKA4_SERVICES, kafka4_service
from eoslab.settings import kafka4_lib

pytestmark = [pytest.mark.lab, pytest.mark.kafka4]

NODES = {1, 2, 3}


def properties(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs if not key.startswith("#")}


def test_three_nodes_are_registered_and_the_quorum_has_a_leader(lab: LocalRuntime) -> None:
    bootstrap = lab.config.kafka4_bootstrap
    assert metadata_brokers(bootstrap) == NODES
    quorum = metadata_quorum(bootstrap)
    assert quorum is not None
    assert quorum.voters == NODES
    assert quorum.leader_id in NODES
    status = lab.status()
    assert status.up
    assert status.clusters["kafka4"].brokers == [1, 2, 3]
    # The status names the quorum's leader, not what a broker names in Metadata.
    assert status.clusters["kafka4"].controller == quorum.leader_id
    assert [s.name for s in status.services if s.kind == "kafka4"] == list(KAFKA4_SERVICES)


def test_the_dags_health_task_checks_each_target_on_its_own_cluster(
    lab: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Kafka 4 cell's health task asks Kafka 4's nodes (it once asked the reference broker,
    which a lab of Kafka 3.9 and 4 does not run: every Kafka 4 cell of the matrix failed)."""
    monkeypatch.setattr(steps, "lab_config", lambda: lab.config)
    for target, brokers in (("kafka", [1, 2, 3]), ("kafka4", sorted(NODES))):
        checked = steps.check_lab(target)
        assert (checked["bootstrap"], checked["brokers"]) == (lab.config.bootstrap(target), brokers)
    without = replace(lab.config, targets=("kafka",))
    monkeypatch.setattr(steps, "lab_config", lambda: without)
    with pytest.raises(
        steps.LabUnhealthyError, match=r"does not run kafka4 \(its targets: kafka\)"
    ):
        steps.check_lab("kafka4")


def test_a_zookeeper_cluster_has_no_metadata_quorum(lab: LocalRuntime) -> None:
    """DescribeQuorum is KRaft's: Kafka 3.9's brokers answer no quorum, and their controller is
    the one ZooKeeper elected, which they name themselves."""
    assert metadata_quorum(lab.config.bootstrap_servers) is None
    assert cluster_controller(lab.config.bootstrap_servers) in {1, 2, 3}
    assert lab.status().clusters["kafka"].controller in {1, 2, 3}


def test_every_node_is_formatted_with_the_labs_one_cluster_id(lab: LocalRuntime) -> None:
    cluster_id = (lab.config.state_dir / "kafka4-cluster-id").read_text().strip()
    for service in KAFKA4_SERVICES:
        meta = properties(lab.config.state_dir / service / "data" / "meta.properties")
        assert meta["cluster.id"] == cluster_id
        assert meta["node.id"] == service.rsplit("-", 1)[1]


def test_the_durability_and_the_listeners_are_the_3_9_clusters(lab: LocalRuntime) -> None:
    config = properties(lab.config.state_dir / kafka4_service(2) / "server.properties")
    assert config["process.roles"] == "broker,controller"
    assert config["controller.quorum.voters"] == lab.config.kafka4_quorum_voters
    # clients are sent to the proxy; the quorum's listener is never advertised
    proxy_port = lab.config.service(kafka4_service(2)).ports["advertised"]
    assert f"CLIENT://127.0.0.1:{proxy_port}" in config["advertised.listeners"]
    assert "CONTROLLER" not in config["advertised.listeners"]
    routes = {name: listen for name, listen, _ in lab.config.proxy_routes()}
    assert {routes[s] for s in KAFKA4_SERVICES} == {
        lab.config.service(s).ports["advertised"] for s in KAFKA4_SERVICES
    }
    # what the running broker says, not only the file
    admin = AdminClient({"bootstrap.servers": lab.config.kafka4_bootstrap})
    resource = ConfigResource(ConfigResource.Type.BROKER, "2")
    described = admin.describe_configs([resource])[resource].result(timeout=30)
    assert {
        name: described[name].value
        for name in (
            "default.replication.factor",
            "min.insync.replicas",
            "unclean.leader.election.enable",
            "group.consumer.session.timeout.ms",
        )
    } == {
        "default.replication.factor": "3",
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "false",
        "group.consumer.session.timeout.ms": "6000",
    }


def test_the_nodes_log_through_log4j2_with_kafka_tools_on_their_classpath(
    lab: LocalRuntime,
) -> None:
    """The nodes run with lib/*, which also holds kafka-tools (the Java client 4.4's
    TransactionalMessageCopier, services/kafka4/pom.xml): one SLF4J binding still, so every node
    logs through log4j 2 in the lab's pattern, and SLF4J complains of nothing."""
    jars = {jar.name for jar in kafka4_lib().glob("*.jar")}
    assert "kafka-tools-4.4.0.jar" in jars
    bindings = {j for j in jars if j.startswith(("log4j-slf4j", "slf4j-reload4j", "logback"))}
    assert [b.rsplit("-", 1)[0] for b in bindings] == ["log4j-slf4j-impl"]
    assert not {j for j in jars if j.startswith(("connect-runtime", "junit", "jetty"))}
    for service in KAFKA4_SERVICES:
        log = lab.log_path(service).read_text(errors="replace")
        assert "SLF4J:" not in log, service
        assert re.search(r"^\[\d{4}-\d\d-\d\d [^]]*\] INFO .* \(kafka\.", log, re.M), service


def test_every_kafka4_socket_listens_on_loopback_only(lab: LocalRuntime) -> None:
    records = {s.name for s in lab.status().services if s.kind == "kafka4"}
    pids = {
        p.pid
        for p in processes_of(lab.config.state_dir)
        if p.name() == "java" and any(name in " ".join(p.cmdline()) for name in records)
    }
    assert len(pids) == 3
    listening = [
        c
        for c in psutil.net_connections("inet")
        if c.pid in pids and c.status == psutil.CONN_LISTEN
    ]
    assert len(listening) >= 9  # client, internal, controller on each node
    for connection in listening:
        ip = ipaddress.ip_address(connection.laddr.ip)
        assert (getattr(ip, "ipv4_mapped", None) or ip) == ipaddress.ip_address("127.0.0.1")


def test_idempotent_round_trip_through_the_proxy(lab: LocalRuntime) -> None:
    bootstrap = lab.config.kafka4_bootstrap
    create_topic(bootstrap, "kafka4-round-trip", partitions=3, replication=3)
    ledger = smoke.produce(bootstrap, "kafka4-round-trip", partitions=3, count=2000)
    findings = smoke.check(ledger, smoke.consume(bootstrap, "kafka4-round-trip", partitions=3))
    assert len(ledger.acked) == 2000
    assert findings.ok, findings


def test_killing_the_active_controller_elects_another_and_restart_brings_it_back(
    lab: LocalRuntime,
) -> None:
    bootstrap = lab.config.kafka4_bootstrap
    before = metadata_quorum(bootstrap)
    assert before is not None
    victim = kafka4_service(before.leader_id)
    lab.kill(victim)
    try:

        def elected() -> MetadataQuorum | None:
            quorum = metadata_quorum(bootstrap)
            return quorum if quorum and quorum.leader_id not in (-1, before.leader_id) else None

        after = wait_until(elected, timeout_s=60)  # an election takes a fetch timeout (2 s)
        assert after is not None
        assert after.leader_id in NODES - {before.leader_id}
        assert after.leader_epoch > before.leader_epoch
    finally:
        lab.restart(victim)
    assert metadata_brokers(bootstrap) == NODES
    assert lab.status().up


def test_a_paused_node_is_frozen_and_resumes(lab: LocalRuntime) -> None:
    victim = kafka4_service(3)
    lab.pause(victim)
    try:
        assert {s.name: s.state for s in lab.status().services}[victim] == "paused"
    finally:
        lab.resume(victim)
    assert lab.wait_healthy([victim], timeout_s=60)
