"""What a cluster says about itself, read where a network partition cannot hide it: the
evidence that a partition acted and that the cluster is whole again after it healed.

A cut-off broker still answers clients (they reach it through the proxy) with its own stale
view, so the state is read from the side that decides. Kafka 3.9: ZooKeeper itself (the
nemesis is no node of the lab: no cut ever reaches it) — each partition's leader, leader epoch
and ISR as the controller wrote them, the brokers holding a session (``/brokers/ids``), the
controller and its epoch. Kafka 4: a node of the majority, asked directly (Metadata: leader,
leader epoch, ISR, the unfenced brokers; DescribeQuorum: the active controller and the
quorum's epoch).

:class:`ClusterWatch` samples it beside a fault and keeps every change a partition makes (an
ISR that shrank, leadership that moved, a session lost, the controller or the quorum's leader
replaced) with when it was first seen.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.types import TopicName

from eoslab.admin import metadata_quorum
from eoslab.background import Background
from eoslab.clock import wait_until
from eoslab.probe.client import KafkaProtocolClient

logging.getLogger("kazoo").setLevel(logging.CRITICAL)
READ_TIMEOUT_S = 2.0
WATCH_INTERVAL_S = 0.5
WHOLE_TIMEOUT_S = 90.0
"""How long a healed cluster may take to be whole again: every broker back, every ISR full."""


@dataclass(frozen=True)
class Replicas:
    """One partition as the cluster decided it: its leader (-1: none), leader epoch, ISR."""

    leader: int
    epoch: int
    isr: frozenset[int]
    replicas: frozenset[int]


@dataclass(frozen=True)
class ClusterState:
    """The run topic's partitions, the live brokers, and the controller with its epoch."""

    partitions: dict[int, Replicas]
    live: frozenset[int]
    """Kafka 3.9: brokers with a ZooKeeper session; Kafka 4: brokers the controller has not
    fenced."""
    controller: int
    controller_epoch: int
    """Kafka 3.9: /controller_epoch; Kafka 4: the metadata quorum's leader epoch."""

    def whole(self, brokers: Iterable[int]) -> bool:
        """Every broker live, a controller, and every partition led with its full ISR."""
        return (
            self.live >= set(brokers)
            and self.controller >= 0
            and all(p.leader >= 0 and p.isr == p.replicas for p in self.partitions.values())
        )


def changes(
    before: ClusterState, after: ClusterState, name: Callable[[int], str], kraft: bool
) -> list[str]:
    """What moved from ``before`` to ``after`` that a partition makes move, one line each (the
    run topic's partitions by number)."""
    session = "was fenced" if kraft else "lost its ZooKeeper session"
    lines = [f"{name(b)} {session}" for b in sorted(before.live - after.live)]
    if (after.controller, after.controller_epoch) != (before.controller, before.controller_epoch):
        what = "metadata quorum leader" if kraft else "controller"
        lines.append(
            f"{what} {_node(before.controller, name)} -> {_node(after.controller, name)} "
            f"(epoch {before.controller_epoch} -> {after.controller_epoch})"
        )
    for index, was in sorted(before.partitions.items()):
        now = after.partitions.get(index)
        if now is None:
            continue
        if (now.leader, now.epoch) != (was.leader, was.epoch) and now.leader != was.leader:
            lines.append(
                f"partition {index} leader {_node(was.leader, name)} -> {_node(now.leader, name)} "
                f"(leader epoch {was.epoch} -> {now.epoch})"
            )
        if now.isr < was.isr:
            lines.append(f"partition {index} ISR {sorted(was.isr)} -> {sorted(now.isr)}")
    return lines


def _node(node: int, name: Callable[[int], str]) -> str:
    return name(node) if node >= 0 else "none"


def zookeeper_state(connect: str, topic: str) -> ClusterState | None:
    """Kafka 3.9's state as ZooKeeper holds it; None when ZooKeeper does not answer."""
    client = KazooClient(hosts=connect, timeout=READ_TIMEOUT_S, connection_retry={"max_tries": 0})
    try:
        client.start(timeout=READ_TIMEOUT_S)
        live = frozenset(int(b) for b in client.get_children("/brokers/ids"))
        assigned = json.loads(client.get(f"/brokers/topics/{topic}")[0])["partitions"]
        partitions = {}
        for index, replicas in assigned.items():
            state = json.loads(client.get(f"/brokers/topics/{topic}/partitions/{index}/state")[0])
            partitions[int(index)] = Replicas(
                state["leader"], state["leader_epoch"], frozenset(state["isr"]), frozenset(replicas)
            )
        try:
            controller = json.loads(client.get("/controller")[0])["brokerid"]
        except NoNodeError:
            controller = -1  # an election under way
        epoch = int(client.get("/controller_epoch")[0])
        return ClusterState(partitions, live, controller, epoch)
    except (KazooException, KazooTimeoutError, OSError, ValueError, KeyError):
        return None
    finally:
        client.stop()
        client.close()


def kraft_state(
    brokers: Iterable[str], controllers: Iterable[str], topic: str
) -> ClusterState | None:
    """Kafka 4's state: the partitions and the unfenced brokers from the first of ``brokers``
    (host:port, the majority's first) that answers Metadata, the quorum from the first of
    ``controllers`` (their controller listeners) that answers DescribeQuorum as its leader (the
    others refuse: only the leader describes the quorum). Asked directly, not through a broker,
    which forwards to the controller it knew and waits out its timeout when that one is cut
    off. None when no node answers."""
    quorum = next(
        (q for q in (metadata_quorum(a, READ_TIMEOUT_S) for a in controllers) if q is not None),
        None,
    )
    if quorum is None:
        return None
    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    for address in brokers:
        host, _, port = address.rpartition(":")
        try:
            with KafkaProtocolClient(host, int(port), timeout_s=READ_TIMEOUT_S) as client:
                response: MetadataResponse = client.request(request)
        except (OSError, ValueError):
            continue
        (described,) = response.topics
        if described.error_code != ErrorCode.none:
            continue
        partitions = {
            int(p.partition_index): Replicas(
                int(p.leader_id),
                int(p.leader_epoch),
                frozenset(int(r) for r in p.isr_nodes),
                frozenset(int(r) for r in p.replica_nodes),
            )
            for p in described.partitions
        }
        live = frozenset(int(b.node_id) for b in response.brokers)
        return ClusterState(partitions, live, quorum.leader_id, quorum.leader_epoch)
    return None


@dataclass
class ClusterWatch(Background):
    """Samples the cluster beside a fault; keeps each change from ``before`` with the seconds
    after the watch started when it was first seen."""

    read: Callable[[], ClusterState | None]
    describe: Callable[[ClusterState, ClusterState], list[str]]
    before: ClusterState
    seen: dict[str, float] = field(default_factory=dict)
    thread_name = "cluster-watch"
    join_timeout_s = 10.0

    def __post_init__(self) -> None:
        super().__post_init__()
        self._started = time.monotonic()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(WATCH_INTERVAL_S)

    def sample(self) -> None:
        state = self.read()
        if state is None:
            return
        at = round(time.monotonic() - self._started, 1)
        with self._lock:
            for line in self.describe(self.before, state):
                self.seen.setdefault(line, at)

    def changes(self) -> dict[str, float]:
        with self._lock:
            return dict(self.seen)


def await_whole(
    read: Callable[[], ClusterState | None], brokers: Iterable[int], timeout_s: float
) -> float | None:
    """Seconds until the cluster is whole again (:meth:`ClusterState.whole`), or None when it is
    not within ``timeout_s``."""
    start = time.monotonic()
    wanted = set(brokers)

    def whole() -> bool:
        state = read()
        return state is not None and state.whole(wanted)

    if not wait_until(whole, timeout_s, interval_s=WATCH_INTERVAL_S):
        return None
    return round(time.monotonic() - start, 1)
