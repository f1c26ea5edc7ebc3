"""A network partition inside the cluster (Jepsen's nemesis): links between the target's nodes
(Kafka 3.9's brokers and ZooKeeper; Kafka 4's nodes: replication and the Raft quorum) cut, in
groups or in a named shape, both ways or one way; clients still reach every node through the
proxy unless ``clients: cut``. Healed after ``duration``, at a ``heal`` step, else when the run
heals (and, whatever happens to the nemesis, by ``lab down`` and the next ``lab up``).

Shapes (the named node is the step's ``target``, looked up when the step starts):

- ``isolate-leader``: partition's leader alone, the rest together;
- ``isolate-controller``: the active controller alone (Kafka 4: the metadata quorum's leader);
- ``majority-minority``: the target in a minority, the rest the majority (on the lab's
  three-node clusters a minority is one node);
- ``bridge``: the rest split in two halves (seeded) that cannot reach each other, the target
  reaching both (Jepsen's bridge);
- ``one-way``: the target cannot reach the rest, the rest still reach it;
- ``halves``: every node of the cluster (ZooKeeper too) in one of two halves drawn by the seed
  (Jepsen's random halves), the target unused;
- ``groups``: explicit groups of nodes (services or targets such as ``leader`` or
  ``followers``), every group cut from every other (with ``shape: one-way``: two groups, the
  first cannot reach the second); nodes not named keep every link.

Evidence — what the cluster says, read where the partition cannot hide it
(:mod:`eoslab.nemesis.cluster_state`): from the cut on, what moved (an ISR that shrank,
leadership that moved with its leader epoch, a ZooKeeper session lost or a broker fenced, the
controller or the quorum's leader replaced with its epoch) and when; after the heal, how long
the cluster took to be whole again (every broker back, every ISR full). A partition the
cluster never noticed, or one it did not recover from, did not take effect."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar, Literal, Self

from pydantic import Field, field_validator, model_validator

from eoslab.clock import wait_until
from eoslab.fault_events import FaultPhase
from eoslab.nemesis.cluster_state import (
    WHOLE_TIMEOUT_S,
    ClusterState,
    ClusterWatch,
    await_whole,
    changes,
    kraft_state,
    zookeeper_state,
)
from eoslab.nemesis.steps.base import (
    CONTROLLER,
    LEADER,
    RANDOM_BROKER,
    SERVICE_TARGETS,
    EndingStep,
    ResolvedStep,
    ScenarioShape,
    ServiceStep,
    StepContext,
    start_phase,
)
from eoslab.rundir import LabTarget
from eoslab.runtime.netfaults import PROXY, LabNetwork, Link
from eoslab.runtime.topology import HOST, Kind, broker_service, brokers_of

Shape = Literal[
    "isolate-leader", "isolate-controller", "majority-minority", "bridge", "one-way", "halves"
]
ZOOKEEPER = "zookeeper"
GROUP_NAMES = (*(name for name in SERVICE_TARGETS if name != RANDOM_BROKER), ZOOKEEPER)
"""What a group may name: a service, ZooKeeper, or a target looked up at the step's start."""
SHAPE_TARGETS: dict[str, str] = {"isolate-leader": LEADER, "isolate-controller": CONTROLLER}
"""Shapes whose node is fixed by their name."""


def cluster_nodes(target: LabTarget) -> tuple[str, ...]:
    """The nodes of a target's cluster: the ends of the links a partition cuts."""
    zookeeper = (ZOOKEEPER,) if target in ("kafka", "refbroker") else ()
    return (*brokers_of(target), *zookeeper)


BEFORE_READ_S = 10.0
"""How long a partition step tries to read the cluster's state before it cuts."""


class NetworkPartitionStep(ServiceStep, EndingStep):
    kind: Literal["partition"]
    shape: Shape | None = None
    groups: tuple[tuple[str, ...], ...] | None = Field(
        None, description="groups of nodes cut from one another (instead of a shape)"
    )
    clients: Literal["keep", "cut"] = Field(
        "keep", description="cut: the first group (the isolated node) loses its clients too"
    )
    network_kinds: ClassVar[tuple[str, ...]] = ("partition",)

    @field_validator("groups")
    @classmethod
    def _known_nodes(
        cls, groups: tuple[tuple[str, ...], ...] | None
    ) -> tuple[tuple[str, ...], ...] | None:
        if groups is None:
            return None
        if len(groups) < 2 or not all(groups):
            raise ValueError("give two groups or more, none empty")
        for name in (name for group in groups for name in group):
            if name not in GROUP_NAMES:
                raise ValueError(
                    f"unknown node {name!r}; one of {', '.join(map(repr, GROUP_NAMES))}"
                )
        return groups

    @model_validator(mode="after")
    def _shape_or_groups(self) -> Self:
        if self.shape is None and self.groups is None:
            raise ValueError("shape: give a shape or groups")
        if self.groups is not None and self.shape not in (None, "one-way"):
            raise ValueError(f"shape: {self.shape} makes its own groups; with groups, only one-way")
        if self.shape == "one-way" and self.groups is not None and len(self.groups) != 2:
            raise ValueError(
                "groups: a one-way partition has two groups (the first cannot reach the second)"
            )
        return self

    @property
    def service_target(self) -> str | None:
        if self.groups is not None or self.shape == "halves":
            return None
        return SHAPE_TARGETS.get(str(self.shape), self.target)

    def misfit(self, scenario: ScenarioShape) -> str | None:
        if "refbroker" in (self.on or scenario.targets):
            return (
                "kind: the reference broker's only link inside the lab is to ZooKeeper (its PID "
                "blocks), which the lab cuts but cannot yet see lost; on: [kafka, kafka4]"
            )
        return super().misfit(scenario)

    # ---------------------------------------------------------------- the cut
    def layout(
        self, ctx: StepContext, step: ResolvedStep
    ) -> tuple[list[list[str]], list[str], bool]:
        """The groups (services, now), the nodes reaching every group (a bridge), and whether
        the cut is one way (from the first group to the second)."""
        nodes = cluster_nodes(ctx.context.lab_target)
        if self.groups is not None:
            groups = [
                [s for name in group for s in ctx.resolve_target(name, self.partition)]
                for group in self.groups
            ]
            named = [s for group in groups for s in group]
            if len(set(named)) < len(named):
                raise ValueError(f"a node is in two groups: {groups}")
            return groups, [n for n in nodes if n not in named], self.shape == "one-way"
        if self.shape == "halves":
            drawn = list(nodes)
            random.Random(f"halves:{ctx.context.seed}:{step.index}").shuffle(drawn)
            half = len(drawn) // 2
            return [sorted(drawn[:half]), sorted(drawn[half:])], [], False
        node = ctx.service(step)
        rest = [n for n in nodes if n != node]
        if self.shape == "bridge":
            random.Random(f"bridge:{ctx.context.seed}:{step.index}").shuffle(rest)
            half = len(rest) // 2
            return [sorted(rest[:half]), sorted(rest[half:])], [node], False
        return [[node], rest], [], self.shape == "one-way"

    def links(self, network: LabNetwork, groups: list[list[str]], one_way: bool) -> list[Link]:
        """Every link from a node of one group to a node of another (from the first to the
        second only, one way), and the clients' links to the first group when they are cut;
        links without a listener to cut (nobody connects to ZooKeeper's clients) left out."""
        pairs = [
            (source, dest)
            for i, sources in enumerate(groups)
            for j, dests in enumerate(groups)
            if i != j and (not one_way or (i, j) == (0, 1))
            for source in sources
            for dest in dests
        ]
        if self.clients == "cut":
            nodes = network.nodes()
            pairs += [(PROXY, n) for n in groups[0] if nodes[n].kind is not Kind.ZOOKEEPER]
        links = [Link(source, dest) for source, dest in pairs]
        return [link for link in links if network.ports(link)]

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        network = ctx.network()
        groups, bridges, one_way = self.layout(ctx, step)
        links = self.links(network, groups, one_way)
        read = self._reader(ctx, network, groups, bridges)
        # asked again for a while: on a loaded machine one read can miss its 2 s timeout
        before = wait_until(read, BEFORE_READ_S, interval_s=1.0)
        if before is None:
            raise ValueError(
                f"the cluster's state could not be read before the cut (for {BEFORE_READ_S:.0f} s)"
            )
        lab_target = ctx.context.lab_target
        watch = ClusterWatch(
            read=read,
            describe=partial(
                changes,
                name=partial(broker_service, lab_target),
                kraft=lab_target == "kafka4",
            ),
            before=before,
        )
        tag = f"{ctx.context.run_id}/step-{step.index}"
        network.cut(links, tag)
        ctx.broke(
            step,
            f"heal {len(links)} cut link(s)",
            lambda: network.restore(tag),
            watch=watch,
            tag=tag,
            cut_at=time.monotonic(),
        )
        watch.start()
        layout: dict[str, Any] = {
            "groups": groups,
            "bridges": bridges,
            "one_way": one_way,
            "clients": self.clients,
        }
        ctx.judge(step, False, "links cut; the cluster has not said so yet", **layout)
        ctx.log(
            step,
            start_phase(step),
            target=" | ".join(",".join(g) for g in groups),
            links=[str(link) for link in links],
            **layout,
        )

    def _reader(
        self, ctx: StepContext, network: LabNetwork, groups: list[list[str]], bridges: list[str]
    ) -> Callable[[], ClusterState | None]:
        """How the cluster's state is read: from ZooKeeper (Kafka 3.9), else from the nodes
        most likely to know (bridges, then the largest group; the first group last)."""
        config = network.config
        topic = ctx.context.topic
        if ctx.context.lab_target == "kafka":
            return partial(zookeeper_state, config.zookeeper_connect, topic)
        ranked = [bridges, *sorted(groups[1:], key=len, reverse=True), groups[0]]
        nodes = [config.service(n) for group in ranked for n in group]
        brokers = [f"{HOST}:{node.ports['advertised']}" for node in nodes]
        controllers = [f"{HOST}:{node.ports['controller']}" for node in nodes]
        return partial(kraft_state, brokers, controllers, topic)

    def moves(self) -> tuple[str, ...]:
        """What the cluster must say for a named isolation to have acted (the beginnings of
        :func:`~eoslab.nemesis.cluster_state.changes` lines): the controller replaced, the
        partition's leadership moved or its ISR shrunk; () for any change."""
        if self.shape == "isolate-controller":
            return ("controller ", "metadata quorum leader ")
        if self.shape == "isolate-leader":
            return (f"partition {self.partition} leader ", f"partition {self.partition} ISR ")
        return ()

    # ---------------------------------------------------------------- the heal
    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        memo = ctx.memo(step)
        if not memo:
            return  # healed already (a heal step came first)
        watch: ClusterWatch = memo["watch"]
        watch.stop()
        watch.sample()
        seen = watch.changes()
        network = ctx.network()
        dropped = sum(c.packets for c in network.active() if c.tag == memo["tag"])
        cut_s = round(time.monotonic() - memo["cut_at"], 1)
        ctx.repair(step)
        config = network.config
        brokers = (
            config.kafka4_node_ids if ctx.context.lab_target == "kafka4" else config.broker_ids
        )
        whole_s = await_whole(watch.read, brokers, WHOLE_TIMEOUT_S)
        observed: dict[str, Any] = {
            "changes": seen,
            "packets_dropped": dropped,
            "cut_s": cut_s,
            "whole_after_s": whole_s,
        }
        took_effect, evidence = judged(seen, whole_s, cut_s, self.moves())
        ctx.judge(step, took_effect, evidence, **observed)
        ctx.log(step, FaultPhase.END, healed_links=True, **observed)


def judged(
    seen: dict[str, float], whole_s: float | None, cut_s: float, moves: tuple[str, ...] = ()
) -> tuple[bool, str]:
    """Whether a partition took effect (the cluster said so — what ``moves`` names, if it names
    anything — and recovered once healed), and the evidence in one line."""
    if not seen:
        return False, f"cut for {cut_s} s, and the cluster did not notice (nothing moved)"
    moved = "; ".join(f"{line} (after {at} s)" for line, at in seen.items())
    if moves and not any(line.startswith(moves) for line in seen):
        wanted = " or ".join(m.strip() for m in moves)
        return False, f"{moved}; but no {wanted} moved"
    if whole_s is None:
        return False, f"{moved}; not whole {WHOLE_TIMEOUT_S:g} s after the heal"
    return True, f"{moved}; healed after {cut_s} s, whole again {whole_s} s later"
