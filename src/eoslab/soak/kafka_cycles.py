"""Leader kill cycles on the real Kafka clusters: the same idempotent witness producer and
committing consumer group as the reference broker's crash cycles, against a lab of one target
(Kafka 3.9 with ZooKeeper, or Kafka 4 in KRaft mode; three brokers, RF 3, min.insync 2, through
the lab's proxy as users' runs go), with the witness partition's leader killed -9 and restarted
again and again.

Each cycle waits for new acknowledgements, kills the partition's current leader, waits until
another broker leads it, then restarts the killed one (the lab waits until it has registered
again). The same figures as the reference broker's: every acknowledged record in the log once
within its producer session, acknowledged commits never going backwards, the group's committed
offset at the end at least its highest acknowledged commit.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eoslab.admin import LeaderLookupError, create_topic, find_leader
from eoslab.clock import wait_until
from eoslab.rundir import REPLICATION, LabTarget
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.topology import LabConfig, kafka4_service, kafka_service
from eoslab.soak.committer import committed_offset
from eoslab.soak.pacing import KillPacing
from eoslab.soak.witness import WITNESS_TOPIC, read_topic

NEW_LEADER_TIMEOUT_S = 60.0
MAX_EXTRA_S = 0.3
"""After the acknowledgements, a further random pause up to this long before each kill."""


@dataclass(frozen=True)
class KafkaCycleParams:
    cycles: int = 20
    targets: tuple[LabTarget, ...] = ("kafka", "kafka4")
    seed: int = 0
    acks_per_cycle: int = 50
    witness_rate: float = 300.0
    max_seconds: float = 420.0
    """Per cluster: no kill after this long."""
    port_offset: int = 8000
    """The soak's own lab, beside a user's (offset 0) and the test suite's."""


def _service(target: LabTarget, node_id: int) -> str:
    return kafka_service(node_id) if target == "kafka" else kafka4_service(node_id)


def leader_kill_cycles(
    lab: LocalRuntime, target: LabTarget, params: KafkaCycleParams
) -> dict[str, Any]:
    """``params.cycles`` leader kills on ``target`` of a running ``lab``, under the witness
    producer and the committing group; the lab is left with every broker up."""
    bootstrap = lab.config.bootstrap(target)
    create_topic(bootstrap, WITNESS_TOPIC, partitions=1, replication=REPLICATION[target])
    pacing = KillPacing(
        bootstrap, params.witness_rate, params.acks_per_cycle, params.max_seconds,
        MAX_EXTRA_S, params.seed,
    )  # fmt: skip
    killed: list[int] = []
    moved = 0
    failed: list[str] = []
    for _ in pacing.kills(params.cycles):
        leader = find_leader(bootstrap, WITNESS_TOPIC, 0).broker_id
        service = _service(target, leader)
        lab.kill(service)
        killed.append(leader)
        try:
            after = wait_until(
                functools.partial(_new_leader, bootstrap, leader),
                NEW_LEADER_TIMEOUT_S,
                interval_s=0.2,
            )
            moved += bool(after)
            lab.restart(service)
        except Exception as error:  # the cluster did not recover: the finding, reported
            failed.append(f"{service}: {error}")
            break
    pacing.stop()
    check = pacing.witness.check_records(read_topic(bootstrap, WITNESS_TOPIC))
    final_commit = committed_offset(bootstrap)
    return {
        "cycles": len(killed),
        "seconds": round(pacing.seconds, 1),
        "seconds_per_cycle": round(pacing.seconds / max(len(killed), 1), 1),
        "leaders_killed": killed,
        "leadership_moved": moved,
        "failed_recoveries": failed,
        "cycles_without_progress": pacing.stalls,
        "witness": check.figures(),
        "consumer_group": {**pacing.committer.figures(), "committed_offset_at_end": final_commit},
    }


def _new_leader(bootstrap: str, old: int) -> bool:
    try:
        return find_leader(bootstrap, WITNESS_TOPIC, 0, timeout_s=2.0).broker_id != old
    except LeaderLookupError:
        return False


def run_kafka_cycles(params: KafkaCycleParams, workdir: Path) -> dict[str, object]:
    """One lab per target, brought up from a fresh state folder and purged after."""
    results: dict[str, object] = {
        "parameters": {**params.__dict__, "targets": list(params.targets)}
    }
    for target in params.targets:
        lab = LocalRuntime(
            LabConfig(
                state_dir=workdir / f"lab-{target}",
                port_offset=params.port_offset,
                targets=(target,),
                with_postgres=False,
                with_spark_connect=False,
                with_airflow=False,
            )
        )
        lab.up()
        try:
            results[target] = leader_kill_cycles(lab, target, params)
        finally:
            lab.down(purge=True)
    return results
