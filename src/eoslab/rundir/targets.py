"""The lab's targets, and where a run goes.

Part of the run directory's contract: :mod:`eoslab.rundir`."""

from __future__ import annotations

from typing import Literal, get_args

LabTarget = Literal["kafka", "kafka4", "refbroker"]
"""The lab's systems under test: the 3-broker Kafka 3.9 cluster on ZooKeeper, the 3-node Kafka 4
cluster in KRaft mode, and the reference broker."""
Target = LabTarget | Literal["external"]
"""Where a run goes: one of the lab's targets, or a cluster the user names (Kafka's rules)."""
LAB_TARGETS: tuple[LabTarget, ...] = get_args(LabTarget)
TARGETS: tuple[str, ...] = (*LAB_TARGETS, "external")
KAFKA_TARGETS: tuple[LabTarget, ...] = ("kafka", "kafka4")
"""The lab's real Kafka clusters (what a rule of Kafka's applies to)."""
REPLICATION: dict[str, int] = {"kafka": 3, "kafka4": 3, "refbroker": 1, "external": 3}
"""The replication factor of a run's topic on each target (the reference broker is one node)."""


def lab_target(name: str) -> LabTarget:
    """``name`` as one of the lab's targets; ValueError naming the choices otherwise."""
    for target in LAB_TARGETS:
        if name == target:
            return target
    raise ValueError(f"unknown target {name!r}; choose one of: {', '.join(LAB_TARGETS)}")
