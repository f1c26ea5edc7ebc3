"""The lab's services and their ports, as in ARCHITECTURE.md.

Every port is a base port plus one offset, so a second lab (the test suite's, say) can run
beside a user's lab without a clash: offset 0 gives the documented ports.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from eoslab.paths import lab_dir

HOST = "127.0.0.1"


class Kind(StrEnum):
    ZOOKEEPER = "zookeeper"
    KAFKA = "kafka"
    PROXY = "proxy"
    REFBROKER = "refbroker"
    AIRFLOW = "airflow"


AIRFLOW_COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
"""Airflow's parts, one supervised service each (``airflow <component>``)."""


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
    port_offset: int = field(default_factory=lambda: int(os.environ.get("EOSLAB_PORT_OFFSET", "0")))
    brokers: int = 3
    with_refbroker: bool = True
    # Airflow (UI on 8080) for `eoslab lab up`; EOSLAB_WITH_AIRFLOW=0 leaves it out.
    with_airflow: bool = field(
        default_factory=lambda: os.environ.get("EOSLAB_WITH_AIRFLOW", "1") != "0"
    )
    # A third listener per broker, DIRECT on 3909i, advertised as itself: a path around the
    # proxy for benchmarks (proxy against direct) and for checking what really reached the log.
    direct_listener: bool = False
    broker_heap: str = "512m"
    zookeeper_heap: str = "128m"
    up_timeout_s: float = 120.0
    stop_grace_s: float = 30.0

    def port(self, base: int) -> int:
        return base + self.port_offset

    @property
    def broker_ids(self) -> list[int]:
        return list(range(1, self.brokers + 1))

    @property
    def zookeeper_connect(self) -> str:
        return f"{HOST}:{self.port(2181)}"

    @property
    def bootstrap_servers(self) -> str:
        """Kafka as clients see it: through the proxies on 909i."""
        return ",".join(f"{HOST}:{self.port(9090 + i)}" for i in self.broker_ids)

    @property
    def direct_bootstrap_servers(self) -> str:
        """Kafka around the proxy (only with `direct_listener`)."""
        if not self.direct_listener:
            raise ValueError("this lab has no DIRECT listener (LabConfig.direct_listener)")
        return ",".join(f"{HOST}:{self.port(39090 + i)}" for i in self.broker_ids)

    @property
    def refbroker_bootstrap(self) -> str:
        return f"{HOST}:{self.port(9192)}"

    @property
    def proxy_control_url(self) -> str:
        return f"http://{HOST}:{self.port(8474)}"

    @property
    def refbroker_control_url(self) -> str:
        return f"http://{HOST}:{self.port(9199)}"

    @property
    def airflow_url(self) -> str:
        return f"http://{HOST}:{self.port(8080)}"

    @property
    def airflow_home(self) -> Path:
        return self.state_dir / "airflow"

    def services(self) -> list[Service]:
        """All services in start order (ZooKeeper first, then the brokers, the proxy, Airflow)."""
        services = [Service("zookeeper", Kind.ZOOKEEPER, {"client": self.port(2181)})]
        services += [
            Service(
                f"kafka-{i}",
                Kind.KAFKA,
                {
                    "client": self.port(29090 + i),
                    "internal": self.port(19090 + i),
                    "advertised": self.port(9090 + i),
                    **({"direct": self.port(39090 + i)} if self.direct_listener else {}),
                },
                broker_id=i,
            )
            for i in self.broker_ids
        ]
        if self.with_refbroker:
            services.append(
                Service(
                    "refbroker",
                    Kind.REFBROKER,
                    {
                        "client": self.port(29192),
                        "advertised": self.port(9192),
                        "control": self.port(9199),
                    },
                )
            )
        if self.brokers or self.with_refbroker:
            services.append(Service("proxy", Kind.PROXY, {"control": self.port(8474)}))
        if self.with_airflow:
            services += [
                Service(
                    f"airflow-{component}",
                    Kind.AIRFLOW,
                    {"ui": self.port(8080)} if component == "api-server" else {},
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
