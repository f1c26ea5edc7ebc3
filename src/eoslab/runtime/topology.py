"""The lab's services and their ports, as in ARCHITECTURE.md.

Every port is a base port plus one offset, so a second lab (the test suite's, say) can run
beside a user's lab without a clash: offset 0 gives the documented ports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from eoslab.rundir import LabTarget
from eoslab.runtime.spark import remote_url
from eoslab.settings import (
    HOST,
    BasePort,
    lab_dir,
    port_offset,
    with_airflow,
    with_postgres,
    with_spark_connect,
)


class Kind(StrEnum):
    ZOOKEEPER = "zookeeper"
    KAFKA = "kafka"
    PROXY = "proxy"
    REFBROKER = "refbroker"
    POSTGRES = "postgres"
    SPARK_CONNECT = "spark-connect"
    AIRFLOW = "airflow"


AIRFLOW_COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
"""Airflow's parts, one supervised service each (``airflow <component>``)."""

BROKERS = 3
"""The Kafka cluster of the lab: three brokers, ids 1..3."""
REFBROKER_SERVICE = "refbroker"
SPARK_CONNECT_SERVICE = "spark-connect"


def kafka_service(broker_id: int) -> str:
    """The lab's name of the Kafka broker with this id: ``kafka-2``."""
    return f"kafka-{broker_id}"


KAFKA_SERVICES = tuple(kafka_service(i) for i in range(1, BROKERS + 1))


def brokers_of(target: LabTarget) -> tuple[str, ...]:
    """The services that are brokers of a target (what a rolling restart goes through)."""
    return KAFKA_SERVICES if target == "kafka" else (REFBROKER_SERVICE,)


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
    """Where the lab keeps its state and which ports it uses."""

    state_dir: Path = field(default_factory=lab_dir)
    port_offset: int = field(default_factory=port_offset)
    brokers: int = BROKERS
    with_refbroker: bool = True
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
    zookeeper_heap: str = "128m"
    up_timeout_s: float = 120.0
    stop_grace_s: float = 30.0

    def port(self, base: int) -> int:
        """A base port (:class:`~eoslab.settings.BasePort`, plus a broker id for Kafka's) moved
        by this lab's offset."""
        return base + self.port_offset

    @property
    def broker_ids(self) -> list[int]:
        return list(range(1, self.brokers + 1))

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
    def refbroker_bootstrap(self) -> str:
        return f"{HOST}:{self.port(BasePort.REFBROKER)}"

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
        services = [Service("zookeeper", Kind.ZOOKEEPER, {"client": self.port(BasePort.ZOOKEEPER)})]
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
        if self.brokers or self.with_refbroker:
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
