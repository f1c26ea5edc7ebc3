"""What the lab reports about itself: services, controller, partition leaders and ISRs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from confluent_kafka import KafkaException

from eoslab.admin import admin_client, metadata_quorum
from eoslab.rundir import LabTarget


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
    """The active controller (on Kafka 4, the metadata quorum's leader)."""
    brokers: list[int] = field(default_factory=list)
    partitions: list[PartitionStatus] = field(default_factory=list)


@dataclass(frozen=True)
class LabStatus:
    runtime: str
    state_dir: str
    services: list[ServiceStatus]
    clusters: dict[LabTarget, ClusterView]
    """Each target the lab runs (``kafka``, ``kafka4``, ``refbroker``), as its metadata shows it."""
    cuts: list[str] = field(default_factory=list)
    """The links between the lab's nodes cut now (network partitions), one line each."""
    removed_cuts: list[str] = field(default_factory=list)
    """Cut links the command found left behind and removed (``lab up`` after a nemesis that
    died mid-partition)."""

    @property
    def up(self) -> bool:
        return bool(self.services) and all(s.healthy for s in self.services)

    def to_json(self) -> dict[str, object]:
        """The services, each target's cluster under its name, and whether all is up."""
        clusters: dict[str, object] = {t: asdict(view) for t, view in self.clusters.items()}
        return {
            "runtime": self.runtime,
            "state_dir": self.state_dir,
            "services": [asdict(s) for s in self.services],
            **clusters,
            "cuts": self.cuts,
            "removed_cuts": self.removed_cuts,
            "up": self.up,
        }


def cluster_view(bootstrap: str, timeout_s: float = 5.0, *, kraft: bool = False) -> ClusterView:
    """The cluster behind ``bootstrap``; ``kraft``: its controller is the metadata quorum's
    leader (the brokers of a KRaft cluster name a random broker as the controller)."""
    client = admin_client(bootstrap)
    try:
        metadata = client.list_topics(timeout=timeout_s)
        controller = client.describe_cluster(request_timeout=timeout_s).result().controller
    except KafkaException:
        return ClusterView(bootstrap, reachable=False)
    controller_id = controller.id if controller is not None else None
    if kraft:
        quorum = metadata_quorum(bootstrap, timeout_s)
        controller_id = quorum.leader_id if quorum is not None and quorum.leader_id >= 0 else None
    partitions = [
        PartitionStatus(name, p.id, p.leader, list(p.replicas), list(p.isrs))
        for name, topic in sorted(metadata.topics.items())
        if not name.startswith("__")
        for p in sorted(topic.partitions.values(), key=lambda p: p.id)
    ]
    return ClusterView(
        bootstrap,
        reachable=True,
        controller=controller_id,
        brokers=sorted(metadata.brokers),
        partitions=partitions,
    )
