"""A network partition inside the cluster (Jepsen's nemesis): links between the target's nodes
(Kafka 3.9's brokers and ZooKeeper; Kafka 4's nodes: replication and the Raft quorum) cut, in
groups or in a named shape, both ways or one way; clients still reach every node through the
proxy unless ``clients: cut``. Healed after ``duration``, at a ``heal`` step, else when the run
heals (and, whatever happens to the nemesis, by ``lab down`` and the next ``lab up``).

Which links, in what shape: :mod:`~eoslab.nemesis.steps.links`.

Evidence — what the cluster says, read where the partition cannot hide it
(:mod:`eoslab.nemesis.cluster_state`): from the cut on, what moved (an ISR that shrank,
leadership that moved with its leader epoch, a ZooKeeper session lost or a broker fenced, the
controller or the quorum's leader replaced with its epoch) and when; after the heal, how long
the cluster took to be whole again (every broker back, every ISR full). A partition the
cluster never noticed, or one it did not recover from, did not take effect."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any, Literal

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
from eoslab.nemesis.steps.base import ResolvedStep, StepContext
from eoslab.nemesis.steps.links import LinkStep
from eoslab.runtime.netfaults import LabNetwork
from eoslab.runtime.topology import HOST, broker_service

BEFORE_READ_S = 10.0
"""How long a partition step tries to read the cluster's state before it cuts."""


class NetworkPartitionStep(LinkStep):
    kind: Literal["partition"]

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
        self.announce(
            ctx, step, (groups, bridges, one_way), links, "the cluster has not said so yet"
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
        brokers = network.config.node_ids(ctx.context.lab_target)
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
