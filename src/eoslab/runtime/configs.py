"""Render each JVM service's config: the shared file in services/ plus per-service lines."""

from __future__ import annotations

from pathlib import Path

from eoslab.runtime.topology import HOST, LabConfig, Service
from eoslab.settings import project_root


def _render(base: Path, overrides: dict[str, str]) -> str:
    lines = [
        line
        for line in base.read_text().rstrip("\n").splitlines()
        if line.partition("=")[0].strip() not in overrides
    ]
    lines += ["", "# Set by the eoslab runtime for this service."]
    lines += [f"{key}={value}" for key, value in overrides.items()]
    return "\n".join(lines) + "\n"


def zookeeper_properties(config: LabConfig, service: Service) -> str:
    data_dir = config.state_dir / service.name / "data"
    return _render(
        project_root() / "services" / "zookeeper" / "zookeeper.properties",
        {"dataDir": str(data_dir), "clientPort": str(service.ports["client"])},
    )


def kafka_properties(config: LabConfig, service: Service) -> str:
    ports = service.ports
    listeners = {"INTERNAL": ports["internal"], "CLIENT": ports["client"]}
    # Clients are sent to the proxy in front of the client listener, never to it directly.
    advertised = {"INTERNAL": ports["internal"], "CLIENT": ports["advertised"]}
    if "direct" in ports:
        listeners["DIRECT"] = advertised["DIRECT"] = ports["direct"]
    overrides = {
        "broker.id": str(service.broker_id),
        "listeners": ",".join(f"{name}://{HOST}:{port}" for name, port in listeners.items()),
        "advertised.listeners": ",".join(f"{n}://{HOST}:{p}" for n, p in advertised.items()),
        "listener.security.protocol.map": ",".join(f"{name}:PLAINTEXT" for name in listeners),
        "log.dirs": str(config.state_dir / service.name / "data"),
        "zookeeper.connect": config.zookeeper_connect,
    }
    if config.brokers < 3:
        # A smaller cluster (tests, benchmarks): replication as wide as the cluster allows.
        width, isr = str(config.brokers), str(min(2, config.brokers))
        overrides |= {
            "default.replication.factor": width,
            "offsets.topic.replication.factor": width,
            "transaction.state.log.replication.factor": width,
            "min.insync.replicas": isr,
            "transaction.state.log.min.isr": isr,
        }
    return _render(project_root() / "services" / "kafka" / "server.properties", overrides)


def kafka4_properties(config: LabConfig, service: Service) -> str:
    """A Kafka 4 node: broker and quorum voter (services/kafka4/server.properties)."""
    ports = service.ports
    listeners = {
        "INTERNAL": ports["internal"],
        "CLIENT": ports["client"],
        "CONTROLLER": ports["controller"],
    }
    # Clients are sent to the proxy; the controller listener is the quorum's, never advertised.
    advertised = {"INTERNAL": ports["internal"], "CLIENT": ports["advertised"]}
    overrides = {
        "node.id": str(service.broker_id),
        "listeners": ",".join(f"{name}://{HOST}:{port}" for name, port in listeners.items()),
        "advertised.listeners": ",".join(f"{n}://{HOST}:{p}" for n, p in advertised.items()),
        "controller.quorum.voters": config.kafka4_quorum_voters,
        "log.dirs": str(config.state_dir / service.name / "data"),
    }
    return _render(project_root() / "services" / "kafka4" / "server.properties", overrides)


def log4j_properties() -> Path:
    return project_root() / "services" / "kafka" / "log4j.properties"


def kafka4_log4j2_properties() -> Path:
    return project_root() / "services" / "kafka4" / "log4j2.properties"
