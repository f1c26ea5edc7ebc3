"""Render each JVM service's config: the shared file in services/ plus per-service lines."""

from __future__ import annotations

from pathlib import Path

from eoslab.paths import project_root
from eoslab.runtime.topology import HOST, LabConfig, Service


def _render(base: Path, overrides: dict[str, str]) -> str:
    lines = base.read_text().rstrip("\n").splitlines()
    lines += ["", "# Added by the eoslab runtime for this service."]
    lines += [f"{key}={value}" for key, value in overrides.items()]
    return "\n".join(lines) + "\n"


def zookeeper_properties(config: LabConfig, service: Service) -> str:
    data_dir = config.state_dir / service.name / "data"
    return _render(
        project_root() / "services" / "zookeeper" / "zookeeper.properties",
        {"dataDir": str(data_dir), "clientPort": str(service.ports["client"])},
    )


def kafka_properties(config: LabConfig, service: Service) -> str:
    internal, client = service.ports["internal"], service.ports["client"]
    return _render(
        project_root() / "services" / "kafka" / "server.properties",
        {
            "broker.id": str(service.broker_id),
            "listeners": f"INTERNAL://{HOST}:{internal},CLIENT://{HOST}:{client}",
            # Clients are sent to the proxy in front of the client listener, never to it directly.
            "advertised.listeners": (
                f"INTERNAL://{HOST}:{internal},CLIENT://{HOST}:{service.ports['advertised']}"
            ),
            "log.dirs": str(config.state_dir / service.name / "data"),
            "zookeeper.connect": config.zookeeper_connect,
        },
    )


def log4j_properties() -> Path:
    return project_root() / "services" / "kafka" / "log4j.properties"
