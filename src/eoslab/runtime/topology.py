"""The lab's services and their ports, as in ARCHITECTURE.md.

Every port is a base port plus one offset, so a second lab (the test suite's, say) can run
beside a user's lab without a clash: offset 0 gives the documented ports.

A lab runs some of the targets (:data:`~eoslab.rundir.LAB_TARGETS`): the ones it is given,
else $EOSLAB_TARGETS, else all. The local runtime records them in its state file and passes
them to its services (Airflow's tasks) as $EOSLAB_TARGETS, and a runtime made for a running
lab takes them from there (:func:`recorded_targets`): every later command sees the lab as it
was brought up.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from eoslab.rundir import LAB_TARGETS, LabTarget, lab_target
from eoslab.runtime.spark import remote_url
from eoslab.settings import (
    HOST,
    BasePort,
    lab_dir,
    lab_targets,
    port_offset,
    with_airflow,
    with_postgres,
    with_spark_connect,
)


class Kind(StrEnum):
    ZOOKEEPER = "zookeeper"
    KAFKA = "kafka"
    KAFKA4 = "kafka4"
    """A Kafka 4 node in KRaft mode: broker and controller in one JVM."""
    PROXY = "proxy"
    REFBROKER = "refbroker"
    POSTGRES = "postgres"
    SPARK_CONNECT = "spark-connect"
    AIRFLOW = "airflow"


AIRFLOW_COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
"""Airflow's parts, one supervised service each (``airflow <component>``)."""

BROKERS = 3
"""The Kafka 3.9 cluster of the lab: three brokers, ids 1..3."""
KAFKA4_NODES = 3
"""The Kafka 4 cluster of the lab: three KRaft nodes, ids 1..3, each a broker and one of the
three voters of the metadata quorum (combined roles: README, "Kafka versions")."""
REFBROKER_SERVICE = "refbroker"
SPARK_CONNECT_SERVICE = "spark-connect"
STATE_FILE = "state.json"
"""The local runtime's record of a running lab, in its state folder."""
COMPOSE_RECORD = Path("compose") / "lab.json"
"""The compose runtime's record of a lab it brought up, in its state folder."""


def kafka_service(broker_id: int) -> str:
    """The lab's name of the Kafka broker with this id: ``kafka-2``."""
    return f"kafka-{broker_id}"


def kafka4_service(node_id: int) -> str:
    """The lab's name of the Kafka 4 node with this id: ``kafka4-2``."""
    return f"kafka4-{node_id}"


KAFKA_SERVICES = tuple(kafka_service(i) for i in range(1, BROKERS + 1))
KAFKA4_SERVICES = tuple(kafka4_service(i) for i in range(1, KAFKA4_NODES + 1))


CLUSTER_TITLES: dict[LabTarget, str] = {
    "kafka": "Kafka 3.9",
    "kafka4": "Kafka 4",
    "refbroker": "reference broker",
}
"""How the lab names each target's cluster to its users."""


def brokers_of(target: LabTarget) -> tuple[str, ...]:
    """The services that are brokers of a target (what a rolling restart goes through)."""
    if target == "kafka":
        return KAFKA_SERVICES
    if target == "kafka4":
        return KAFKA4_SERVICES
    return (REFBROKER_SERVICE,)


def broker_service(target: LabTarget, broker_id: int) -> str:
    """The service of a target's broker (or node) with this id, as metadata names it."""
    if target == "kafka":
        return kafka_service(broker_id)
    if target == "kafka4":
        return kafka4_service(broker_id)
    return REFBROKER_SERVICE


def parse_targets(names: Iterable[str]) -> tuple[LabTarget, ...]:
    """Target names (``kafka,kafka4``) as lab targets in the lab's order; ValueError naming an
    unknown one, or none at all."""
    chosen = {lab_target(name) for name in names}
    if not chosen:
        raise ValueError(f"no target given; choose among: {', '.join(LAB_TARGETS)}")
    return tuple(target for target in LAB_TARGETS if target in chosen)


def default_targets() -> tuple[LabTarget, ...]:
    """$EOSLAB_TARGETS, else every lab target; ValueError naming an unknown one."""
    configured = lab_targets()
    return LAB_TARGETS if configured is None else parse_targets(configured)


def recorded_targets(state_dir: Path) -> tuple[LabTarget, ...] | None:
    """The targets the lab running in ``state_dir`` was brought up with, if one runs there."""
    try:
        recorded = json.loads((state_dir / STATE_FILE).read_text())["targets"]
        return parse_targets(recorded)
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class Service:
    """One supervised process of the lab and the ports it owns (name -> port)."""

    name: str
    kind: Kind
    ports: dict[str, int]
    broker_id: int | None = None
    component: str | None = None
    """The Airflow component a service of kind AIRFLOW runs."""


@dataclass(frozen=True)
class LabConfig:
    """Where the lab keeps its state, which targets it runs and which ports it uses."""

    state_dir: Path = field(default_factory=lab_dir)
    port_offset: int = field(default_factory=port_offset)
    targets: tuple[LabTarget, ...] = field(default_factory=default_targets)
    """The targets the lab runs (see the module docstring)."""
    brokers: int = BROKERS
    """The size of the Kafka 3.9 cluster (when ``kafka`` is a target): 3, fewer for tests."""
    with_zookeeper: bool = False
    """ZooKeeper even when no target needs it (a lab of ZooKeeper alone, for tests)."""
    with_postgres: bool = field(default_factory=with_postgres)
    """The consumers' PostgreSQL sink (`eoslab run --sink lab`); EOSLAB_WITH_POSTGRES=0 leaves
    it out."""
    with_spark_connect: bool = field(default_factory=with_spark_connect)
    """The checker's warm Spark (Spark Connect); EOSLAB_WITH_SPARK_CONNECT=0 leaves it out and
    every check starts a JVM of its own."""
    with_airflow: bool = field(default_factory=with_airflow)
    """Airflow (its UI on 8080) in `eoslab lab up`; EOSLAB_WITH_AIRFLOW=0 leaves it out."""
    # A third listener per broker, DIRECT on 3909i, advertised as itself: a path around the
    # proxy for benchmarks (proxy against direct) and for checking what really reached the log.
    direct_listener: bool = False
    broker_heap: str = "512m"
    quick_jvms: bool = True
    """Kafka's and ZooKeeper's JVMs compile with C1 only and collect with the serial collector
    (:data:`eoslab.runtime.local.QUICK_JVM`): the lab's loads are small, and on two cores
    every broker start and idle second counts. False: the JVM's own defaults (C2, G1), for
    throughput figures (``make bench``)."""
    zookeeper_heap: str = "128m"
    up_timeout_s: float = 120.0
    stop_grace_s: float = 30.0

    def port(self, base: int) -> int:
        """A base port (:class:`~eoslab.settings.BasePort`, plus a broker id for Kafka's) moved
        by this lab's offset."""
        return base + self.port_offset

    @property
    def with_refbroker(self) -> bool:
        return "refbroker" in self.targets

    @property
    def runs_zookeeper(self) -> bool:
        """Kafka 3.9 keeps its metadata there, the reference broker its PID blocks."""
        return self.with_zookeeper or bool({"kafka", "refbroker"} & set(self.targets))

    @property
    def broker_ids(self) -> list[int]:
        """The Kafka 3.9 brokers the lab runs (none unless ``kafka`` is a target)."""
        return list(range(1, self.brokers + 1)) if "kafka" in self.targets else []

    @property
    def kafka4_node_ids(self) -> list[int]:
        """The Kafka 4 nodes the lab runs (none unless ``kafka4`` is a target)."""
        return list(range(1, KAFKA4_NODES + 1)) if "kafka4" in self.targets else []

    def node_ids(self, target: LabTarget) -> list[int]:
        """The brokers (Kafka 4: nodes) of a Kafka target the lab runs, by id."""
        return self.kafka4_node_ids if target == "kafka4" else self.broker_ids

    @property
    def zookeeper_connect(self) -> str:
        return f"{HOST}:{self.port(BasePort.ZOOKEEPER)}"

    @property
    def bootstrap_servers(self) -> str:
        """Kafka as clients see it: through the proxies on 909i."""
        return ",".join(f"{HOST}:{self.port(BasePort.KAFKA + i)}" for i in self.broker_ids)

    @property
    def direct_bootstrap_servers(self) -> str:
        """Kafka around the proxy (only with `direct_listener`)."""
        if not self.direct_listener:
            raise ValueError("this lab has no DIRECT listener (LabConfig.direct_listener)")
        return ",".join(f"{HOST}:{self.port(BasePort.KAFKA_DIRECT + i)}" for i in self.broker_ids)

    @property
    def kafka4_bootstrap(self) -> str:
        """Kafka 4 as clients see it: through the proxies on 929i."""
        nodes = range(1, KAFKA4_NODES + 1)
        return ",".join(f"{HOST}:{self.port(BasePort.KAFKA4 + i)}" for i in nodes)

    @property
    def kafka4_quorum_voters(self) -> str:
        """``controller.quorum.voters``: every node, at its controller listener."""
        nodes = range(1, KAFKA4_NODES + 1)
        return ",".join(f"{i}@{HOST}:{self.port(BasePort.KAFKA4_CONTROLLER + i)}" for i in nodes)

    @property
    def refbroker_bootstrap(self) -> str:
        return f"{HOST}:{self.port(BasePort.REFBROKER)}"

    def bootstrap(self, target: LabTarget) -> str:
        """A target's bootstrap servers, as its clients reach it (through the proxy)."""
        if target == "kafka":
            return self.bootstrap_servers
        if target == "kafka4":
            return self.kafka4_bootstrap
        return self.refbroker_bootstrap

    @property
    def proxy_control_url(self) -> str:
        return f"http://{HOST}:{self.port(BasePort.PROXY_CONTROL)}"

    @property
    def refbroker_control_url(self) -> str:
        return f"http://{HOST}:{self.port(BasePort.REFBROKER_CONTROL)}"

    @property
    def airflow_url(self) -> str:
        return f"http://{HOST}:{self.port(BasePort.AIRFLOW)}"

    @property
    def spark_connect_port(self) -> int:
        return self.port(BasePort.SPARK_CONNECT)

    @property
    def spark_remote(self) -> str:
        """The warm Spark as the checker reaches it: ``sc://127.0.0.1:15002``."""
        return remote_url(HOST, self.spark_connect_port)

    @property
    def postgres_root(self) -> Path:
        """The sink server's cluster, password and log."""
        return self.state_dir / "postgres"

    @property
    def airflow_home(self) -> Path:
        return self.state_dir / "airflow"

    def services(self) -> list[Service]:
        """All services in start order (ZooKeeper first, then the brokers, the proxy, Airflow)."""
        services = []
        if self.runs_zookeeper:
            services.append(
                Service("zookeeper", Kind.ZOOKEEPER, {"client": self.port(BasePort.ZOOKEEPER)})
            )
        services += [
            Service(
                kafka_service(i),
                Kind.KAFKA,
                {
                    "client": self.port(BasePort.KAFKA_CLIENT + i),
                    "internal": self.port(BasePort.KAFKA_INTERNAL + i),
                    "advertised": self.port(BasePort.KAFKA + i),
                    **(
                        {"direct": self.port(BasePort.KAFKA_DIRECT + i)}
                        if self.direct_listener
                        else {}
                    ),
                },
                broker_id=i,
            )
            for i in self.broker_ids
        ]
        services += [
            Service(
                kafka4_service(i),
                Kind.KAFKA4,
                {
                    "client": self.port(BasePort.KAFKA4_CLIENT + i),
                    "internal": self.port(BasePort.KAFKA4_INTERNAL + i),
                    "controller": self.port(BasePort.KAFKA4_CONTROLLER + i),
                    "advertised": self.port(BasePort.KAFKA4 + i),
                },
                broker_id=i,
            )
            for i in self.kafka4_node_ids
        ]
        if self.with_refbroker:
            services.append(
                Service(
                    REFBROKER_SERVICE,
                    Kind.REFBROKER,
                    {
                        "client": self.port(BasePort.REFBROKER_CLIENT),
                        "advertised": self.port(BasePort.REFBROKER),
                        "control": self.port(BasePort.REFBROKER_CONTROL),
                    },
                )
            )
        if self.with_postgres:
            services.append(
                Service("postgres", Kind.POSTGRES, {"client": self.port(BasePort.POSTGRES)})
            )
        if self.with_spark_connect:
            services.append(
                Service(
                    SPARK_CONNECT_SERVICE, Kind.SPARK_CONNECT, {"grpc": self.spark_connect_port}
                )
            )
        if self.broker_ids or self.kafka4_node_ids or self.with_refbroker:
            services.append(
                Service("proxy", Kind.PROXY, {"control": self.port(BasePort.PROXY_CONTROL)})
            )
        if self.with_airflow:
            services += [
                Service(
                    f"airflow-{component}",
                    Kind.AIRFLOW,
                    {"ui": self.port(BasePort.AIRFLOW)} if component == "api-server" else {},
                    component=component,
                )
                for component in AIRFLOW_COMPONENTS
            ]
        return services

    def service(self, name: str) -> Service:
        for service in self.services():
            if service.name == name:
                return service
        known = ", ".join(s.name for s in self.services())
        raise KeyError(f"unknown service {name!r}; the lab has: {known}")

    def proxy_routes(self) -> list[tuple[str, int, int]]:
        """(route name, listen port, upstream port): every client connection crosses the proxy."""
        return [
            (s.name, s.ports["advertised"], s.ports["client"])
            for s in self.services()
            if "advertised" in s.ports
        ]


def running_lab_config() -> LabConfig:
    """The lab of this environment's state folder, with the targets it was brought up with
    when one runs there (else :func:`default_targets`)."""
    config = LabConfig()
    recorded = recorded_targets(config.state_dir)
    return config if recorded is None else replace(config, targets=recorded)
