"""Which links a network step acts on (:class:`LinkStep`): the nodes of the target's cluster in
groups, or in a named shape, every link from a node of one group to a node of another, both
ways or one way, and the clients' links to the first group with ``clients: cut``. A partition
(:mod:`~eoslab.nemesis.steps.partition`) cuts them; ``link-delay`` and ``link-loss`` slow them
or make them lossy.

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
  first cannot reach the second); nodes not named keep every link."""

from __future__ import annotations

import abc
import random
from collections.abc import Callable
from typing import Any, ClassVar, Literal, Self

from pydantic import Field, field_validator, model_validator

from eoslab.clock import now_ms, wait_until
from eoslab.fault_events import FaultPhase
from eoslab.nemesis.ack_latency import BEFORE_MS, Window, ack_latencies, slowed, windows
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
from eoslab.runtime.netfaults import PROXY, Action, LabNetwork, Link
from eoslab.runtime.topology import Kind, brokers_of

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


NETWORK_KINDS = ("partition", "link-delay", "link-loss")
"""The kinds of step that act on links: what a ``heal`` step ends."""


class LinkStep(ServiceStep, EndingStep):
    """A step on links between the cluster's nodes: which ones (its shape or groups)."""

    acted: ClassVar[str] = "cut"
    """What the step does to its links, in its evidence's words."""

    shape: Shape | None = None
    groups: tuple[tuple[str, ...], ...] | None = Field(
        None, description="groups of nodes cut from one another (instead of a shape)"
    )
    clients: Literal["keep", "cut"] = Field(
        "keep", description="cut: the first group (the isolated node) loses its clients too"
    )

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

    def announce(
        self,
        ctx: StepContext,
        step: ResolvedStep,
        layout: tuple[list[list[str]], list[str], bool],
        links: list[Link],
        pending: str,
    ) -> None:
        """Once the links are acted on: the step judged not in effect yet (``pending`` says
        what it waits for), and its start logged with the groups and the links."""
        groups, bridges, one_way = layout
        detail: dict[str, Any] = {
            "groups": groups,
            "bridges": bridges,
            "one_way": one_way,
            "clients": self.clients,
        }
        ctx.judge(step, False, f"links {self.acted}; {pending}", **detail)
        ctx.log(
            step,
            start_phase(step),
            target=" | ".join(",".join(g) for g in groups),
            links=[str(link) for link in links],
            **detail,
        )

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


SETTLE_S = 5.0
"""How long a slow-link step waits after its heal for the records sent during it to be
acknowledged and written to the history."""


class DegradedLinkStep(LinkStep):
    """Links slowed or made lossy, not cut: the cluster stays whole (no ISR need shrink, no
    leader move), so the evidence is what the producers saw — the acknowledgements of some
    partition took longer while the links were degraded than just before
    (:mod:`eoslab.nemesis.ack_latency`), beside the packets the links' rules took."""

    acted: ClassVar[str] = "degraded"

    @abc.abstractmethod
    def slower_by_ms(self) -> float:
        """How much longer (median) some partition's acknowledgements must have taken."""

    @abc.abstractmethod
    def degrade(self, ctx: StepContext, step: ResolvedStep) -> tuple[Action, Callable[[], Any]]:
        """The rule's action, and how to end whatever it needs (returns its tally, or None)."""

    def start(self, ctx: StepContext, step: ResolvedStep) -> None:
        network = ctx.network()
        groups, bridges, one_way = self.layout(ctx, step)
        links = self.links(network, groups, one_way)
        if not links:
            raise ValueError(f"no link between {groups}")
        action, finish = self.degrade(ctx, step)
        tag = f"{ctx.context.run_id}/step-{step.index}"
        try:
            network.cut(links, tag, action)
        except Exception:
            finish()
            raise
        ended: dict[str, Any] = {}

        def undo() -> None:
            ended["taken"] = sum(c.packets for c in network.active() if c.tag == tag)
            network.restore(tag)
            ended["tally"] = finish()

        ctx.broke(
            step, f"restore {len(links)} link(s)", undo, tag=tag, since_ms=now_ms(), ended=ended
        )
        self.announce(ctx, step, (groups, bridges, one_way), links, "no acknowledgement timed yet")

    def end(self, ctx: StepContext, step: ResolvedStep) -> None:
        memo = ctx.memo(step)
        if not memo:
            return  # healed already (a heal step came first)
        ctx.repair(step)
        since_ms, until_ms = memo["since_ms"], now_ms()
        history = ctx.context.run_dir.history_dir
        during: dict[int, Window] = {}

        def timed() -> bool:
            during.update(windows(ack_latencies(history, since_ms, until_ms)))
            return bool(during)

        wait_until(timed, SETTLE_S, interval_s=0.5)
        before = windows(ack_latencies(history, since_ms - BEFORE_MS, since_ms))
        took_effect, evidence = slowed(before, during, self.slower_by_ms())
        ended = memo["ended"]
        taken, tally = ended.get("taken", 0), ended.get("tally")
        observed: dict[str, Any] = {
            "packets": taken,
            "before": {p: str(w) for p, w in before.items()},
            "during": {p: str(w) for p, w in during.items()},
        }
        if tally is not None:
            observed["held"] = str(tally)
        if taken == 0:
            took_effect, evidence = False, f"the links' rules took no packet; {evidence}"
        else:
            evidence = f"{evidence}; {taken} packets taken by the links' rules"
        ctx.judge(step, took_effect, evidence, **observed)
        ctx.log(step, FaultPhase.END, healed_links=True, **observed)
