"""What the lab reports about itself: services, controller, partition leaders and ISRs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from confluent_kafka import KafkaException

from eoslab.admin import admin_client


class LabError(Exception):
    """A lab operation failed; the message says what and how to fix it."""


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    kind: str
    state: str  # running | paused | stopped
    healthy: bool
    pid: int | None
    ports: dict[str, int]
    log: str | None


@dataclass(frozen=True)
class PartitionStatus:
    topic: str
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]


@dataclass(frozen=True)
class ClusterView:
    """A cluster as its metadata shows it (Kafka or the reference broker)."""

    bootstrap: str
    reachable: bool
    controller: int | None = None
    brokers: list[int] = field(default_factory=list)
    partitions: list[PartitionStatus] = field(default_factory=list)


@dataclass(frozen=True)
class LabStatus:
    runtime: str
    state_dir: str
    services: list[ServiceStatus]
    kafka: ClusterView
    refbroker: ClusterView | None

    @property
    def up(self) -> bool:
        return bool(self.services) and all(s.healthy for s in self.services)

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "up": self.up}


def cluster_view(bootstrap: str, timeout_s: float = 5.0) -> ClusterView:
    client = admin_client(bootstrap)
    try:
        metadata = client.list_topics(timeout=timeout_s)
        controller = client.describe_cluster(request_timeout=timeout_s).result().controller
    except KafkaException:
        return ClusterView(bootstrap, reachable=False)
    partitions = [
        PartitionStatus(name, p.id, p.leader, list(p.replicas), list(p.isrs))
        for name, topic in sorted(metadata.topics.items())
        if not name.startswith("__")
        for p in sorted(topic.partitions.values(), key=lambda p: p.id)
    ]
    return ClusterView(
        bootstrap,
        reachable=True,
        controller=controller.id if controller is not None else None,
        brokers=sorted(metadata.brokers),
        partitions=partitions,
    )
