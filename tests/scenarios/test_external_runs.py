"""A cluster the lab does not configure, behind a fronting proxy the run starts: the lab's
Kafka 4 reached on its client ports (29291-3, not through the lab's proxy), as a user's own
cluster would be. Its nodes advertise the lab proxy's addresses (929i), so the lab's proxy is
the witness: every connection a client opens to a broker it was told of goes through it, and a
client that went around the fronting proxy would show up there and not in the fronting
proxy's tally."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession

from eoslab.admin import metadata_quorum
from eoslab.proxy.control_client import ProxyControl
from eoslab.rundir import VerdictStatus
from eoslab.runtime.fronting import FrontingProxy
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.topology import KAFKA4_SERVICES
from eoslab.scenarios.catalogue import find_scenario
from eoslab.scenarios.executor import RunError, RunResult, plan
from eoslab.settings import HOST, BasePort
from eoslab.verify.checker import verify_run
from lab_runs import execute_on

pytestmark = [pytest.mark.lab, pytest.mark.kafka4]

RECORDS = 1500
NODES = (1, 2, 3)


def direct_bootstrap(lab: LocalRuntime) -> str:
    return ",".join(f"{HOST}:{lab.config.port(BasePort.KAFKA4_CLIENT + i)}" for i in NODES)


def run_external(
    lab: LocalRuntime, tmp_path: Path, scenario: str, bootstrap: str, **options: Any
) -> RunResult:
    """``eoslab run SCENARIO --target external --bootstrap BOOTSTRAP`` (``options``: records,
    expect_as, replication): the run is valid and each of its faults took effect."""
    result = execute_on(
        lab,
        tmp_path,
        scenario,
        "external",
        bootstrap=bootstrap,
        **options,
    )
    assert result.invalid_because == []
    assert result.info.faults
    for fault in result.info.faults:
        assert fault.took_effect, fault.evidence
    return result


def assert_conforms(result: RunResult, spark: SparkSession) -> None:
    """The checker's verdict on the run (its Spark reads the topic: connections of its own)."""
    verdict = verify_run(result.run_dir.path, spark=spark)
    assert verdict.status is VerdictStatus.CONFORMS, [m.summary for m in verdict.mismatches]


def produce_frames(routes: dict[str, Any], names: tuple[str, ...]) -> int:
    return sum(routes[name]["apis"].get("Produce", {}).get("request_frames", 0) for name in names)


@pytest.mark.parametrize(
    ("scenario", "expect_as"), [("lost-acks", None), ("lost-commit", "kafka4")]
)
def test_a_proxy_fault_on_a_cluster_the_lab_does_not_configure_crosses_the_proxy(
    lab: LocalRuntime, spark: SparkSession, tmp_path: Path, scenario: str, expect_as: str | None
) -> None:
    """The producer half (lost Produce answers on the leader; judged as Kafka 3.9, the default)
    and the consumer half (lost OffsetCommit answers on the group's coordinator, found through
    FindCoordinator; judged as Kafka 4, as asked)."""
    witness = ProxyControl(lab.config.proxy_control_url)
    before = witness.counters()["routes"]
    bootstrap = direct_bootstrap(lab)
    result = run_external(lab, tmp_path, scenario, bootstrap, records=RECORDS, expect_as=expect_as)
    after = witness.counters()["routes"]
    assert_conforms(result, spark)
    info = result.info
    judged = plan(find_scenario(scenario), "external", bootstrap=bootstrap, expect_as=expect_as)
    assert info.judged_as == judged.lab_target == (expect_as or "kafka")
    assert info.expected == judged.scenario.expected.for_run(judged.lab_target, judged.mode)
    (fault,) = info.faults
    assert (fault.target or "").startswith("broker-")
    assert fault.observed["injected"] == 3
    assert info.bootstrap == bootstrap

    fronting = info.fronting
    assert fronting is not None
    # A route per node, each forwarding to the address the node advertises (the lab proxy's).
    assert set(fronting["handed_out"]) == {f"broker-{i}" for i in NODES}
    assert fronting["upstreams"] == {
        f"broker-{i}": f"{HOST}:{lab.config.port(BasePort.KAFKA4 + i)}" for i in NODES
    }
    assert fronting["rewritten"]["Metadata"] > 0
    if scenario == "lost-commit":
        assert fronting["rewritten"]["FindCoordinator"] > 0
    assert (fronting["unencodable"], fronting["controllers"]) == ({}, 0)
    # Every connection to a broker and every Produce the witness saw came from the fronting
    # proxy's broker routes: none went around it.
    routes = fronting["routes"]
    brokers = tuple(f"broker-{i}" for i in NODES)
    reached = {
        service: after[service]["connections"]["accepted"]
        - before[service]["connections"]["accepted"]
        for service in KAFKA4_SERVICES
    }
    assert sum(reached.values()) == sum(routes[b]["connections"]["accepted"] for b in brokers)
    fronted_produces = produce_frames(routes, brokers)
    assert fronted_produces > 0
    assert (
        produce_frames(after, KAFKA4_SERVICES) - produce_frames(before, KAFKA4_SERVICES)
        == fronted_produces
    )

    # The witness's negative control: a client given the cluster's own address goes around
    # (the fronting proxy is gone with its run), and the witness counts its Produce requests.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    producer.produce(info.topic, b"around the proxy")
    assert producer.flush(30) == 0
    around = witness.counters()["routes"]
    assert produce_frames(around, KAFKA4_SERVICES) > produce_frames(after, KAFKA4_SERVICES)


def test_an_external_run_refuses_process_faults_and_an_address_that_is_not_kafka(
    lab: LocalRuntime, tmp_path: Path
) -> None:
    with pytest.raises(RunError, match=r"kill, which need the lab's runtime"):
        execute_on(
            lab,
            tmp_path,
            "leader-kill",
            "external",
            bootstrap=direct_bootstrap(lab),
        )
    not_kafka = f"{HOST}:{lab.config.port(BasePort.PROXY_CONTROL)}"  # an HTTP server
    with pytest.raises(RunError, match=rf"^bootstrap {not_kafka}: not Kafka") as refused:
        execute_on(
            lab,
            tmp_path,
            "lost-acks",
            "external",
            bootstrap=not_kafka,
        )
    assert "\n" not in str(refused.value)
    assert list(tmp_path.iterdir()) == []  # no run directory left for the refused runs


@pytest.mark.parametrize(
    "case",
    [("txn-zombie-producer", "kafka4", "kafka4"), ("lost-acks", "refbroker", None)],
    ids=lambda case: f"{case[0]}/{case[1]}",
)
def test_client_faults_and_the_reference_broker_as_a_users_cluster(
    lab: LocalRuntime,
    spark: SparkSession,
    tmp_path: Path,
    case: tuple[str, str, str | None],
) -> None:
    """A zombie transactional producer fenced by Kafka 4 reached as an external cluster (a
    client fault: no proxy in front), and lost acks on the reference broker reached on its own
    client port (one node: replication 1), through a fronting proxy."""
    scenario, cluster, expect_as = case
    bootstrap = (
        direct_bootstrap(lab)
        if cluster == "kafka4"
        else f"{HOST}:{lab.config.port(BasePort.REFBROKER_CLIENT)}"
    )
    result = run_external(
        lab,
        tmp_path,
        scenario,
        bootstrap,
        expect_as=expect_as,
        replication=None if cluster == "kafka4" else 1,
    )
    assert_conforms(result, spark)
    (fault,) = result.info.faults
    fronting = result.info.fronting
    if cluster == "kafka4":
        assert fronting is None  # a client fault: the clients reach the cluster as it is
    else:
        assert fronting is not None
        assert fault.observed["injected"] == 3
        assert list(fronting["handed_out"]) == ["broker-1"]


def test_an_admin_clients_view_through_the_fronting_proxy(
    lab: LocalRuntime, tmp_path: Path
) -> None:
    """An AdminClient's describe_cluster on Kafka 4 through `eoslab chaos front`: every node it
    is told of is one of the proxy's routes (Kafka's answer, rewritten), and Kafka 4's own
    answer, asked directly, is not (the control). librdkafka asks it with Metadata; the
    DescribeCluster API (Kafka's Java admin) is rewritten as pure logic in tests/proxy.
    DescribeQuorum names the controllers, which no route forwards to: its answer crosses the
    proxy as Kafka gave it, counted."""
    bootstrap = direct_bootstrap(lab)
    front = FrontingProxy.start(bootstrap, tmp_path / "front.log", tmp_path / "faults.jsonl", 0)
    try:
        fronted = AdminClient({"bootstrap.servers": front.bootstrap})  # kept: its futures
        told = {f"{n.host}:{n.port}" for n in fronted.describe_cluster().result(timeout=30).nodes}
        quorum = metadata_quorum(front.bootstrap)
        counters = ProxyControl(front.control_url).counters()
    finally:
        front.stop()
    fronting = counters["fronting"]
    assert fronting["rewritten"]["Metadata"] > 0
    assert told == set(fronting["handed_out"].values())
    assert len(told) == len(NODES)
    direct = AdminClient({"bootstrap.servers": bootstrap})
    nodes = direct.describe_cluster().result(timeout=30).nodes
    assert not told & {f"{node.host}:{node.port}" for node in nodes}
    asked_directly = metadata_quorum(bootstrap)
    assert quorum is not None
    assert asked_directly is not None
    assert quorum.voters == asked_directly.voters == set(NODES)
    assert fronting["controllers"] >= 1
    assert "DescribeQuorum" not in fronting["rewritten"]


@pytest.mark.parametrize(
    ("scenario", "records"),
    [
        ("leader-partition", 1500),  # blackhole
        ("lost-request", 1500),  # drop-request
        ("not-enough-replicas-after-write", 1500),  # error
        ("redpanda-3039", None),  # delay, then drop-response
    ],
)
def test_each_proxy_fault_kind_takes_effect_on_a_users_cluster(
    lab: LocalRuntime, spark: SparkSession, tmp_path: Path, scenario: str, records: int | None
) -> None:
    """The wire faults beyond lost answers, on Kafka 4 reached as an external cluster through a
    fronting proxy: each takes effect on the route the scenario targets and the run conforms
    (judged as Kafka 4 where the scenario knows it, else as Kafka 3.9)."""
    expect_as = "kafka4" if "kafka4" in find_scenario(scenario).targets else None
    result = run_external(
        lab, tmp_path, scenario, direct_bootstrap(lab), records=records, expect_as=expect_as
    )
    assert_conforms(result, spark)
    assert all((fault.target or "").startswith("broker-") for fault in result.info.faults)
    assert result.info.fronting is not None
