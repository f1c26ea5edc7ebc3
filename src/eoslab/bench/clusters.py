"""Kafka 4 beside Kafka 3.9, in one run: how long `lab up` takes with both clusters against 3.9
alone (and Kafka 4 alone), and idempotent produce throughput through the chaos proxy, Kafka 4
against Kafka 3.9 and the reference broker against Kafka 4.

Each lab runs the targets' clusters and the proxy only (no PostgreSQL, warm Spark or Airflow,
which do not depend on the targets), from a fresh state folder: Kafka 4's nodes are formatted
on the way up, as on a first `lab up`. Throughput is measured as users' runs produce: through
the proxy, acks=all, to a one-partition topic of the target's replication factor (3 on both
Kafkas, min.insync.replicas 2; 1 on the reference broker).
"""

from __future__ import annotations

import time
from pathlib import Path

from eoslab.bench.produce_throughput import SETTINGS, VALUE_BYTES, best_of, new_topic
from eoslab.rundir import LAB_TARGETS, REPLICATION, LabTarget
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.topology import LabConfig

LABS: dict[str, tuple[LabTarget, ...]] = {
    "kafka_3_9_only": ("kafka", "refbroker"),
    "kafka4_only": ("kafka4",),
    "both_clusters": LAB_TARGETS,
}
"""The labs brought up, each timed; the last one stays up for the throughput figures."""


def lab_config(state_dir: Path, port_offset: int, targets: tuple[LabTarget, ...]) -> LabConfig:
    return LabConfig(
        state_dir=state_dir,
        port_offset=port_offset,
        targets=targets,
        with_postgres=False,
        with_spark_connect=False,
        with_airflow=False,
        quick_jvms=False,  # throughput of the JVMs as Kafka's own scripts start them
    )


def throughput(lab: LocalRuntime, records: int, repeats: int) -> dict[str, object]:
    """Every target of ``lab`` through its proxy, and the two ratios."""
    rates = {}
    for target in lab.config.targets:
        bootstrap = lab.config.bootstrap(target)
        topic = new_topic(bootstrap, replication=REPLICATION[target])
        rates[target] = best_of(repeats, bootstrap, topic, records)

    def ratio(over: LabTarget, under: LabTarget) -> float:
        return round(rates[over]["records_per_s"] / rates[under]["records_per_s"], 3)

    return {
        "value_bytes": VALUE_BYTES,
        "producer_settings": SETTINGS,
        "through_proxy": rates,
        "kafka4_vs_kafka": ratio("kafka4", "kafka"),
        "refbroker_vs_kafka4": ratio("refbroker", "kafka4"),
    }


def run(state_root: Path, port_offset: int, records: int, repeats: int) -> dict[str, object]:
    results: dict[str, object] = {}
    up_seconds: dict[str, float] = {}
    for name, targets in LABS.items():
        lab = LocalRuntime(lab_config(state_root / name, port_offset, targets))
        begin = time.monotonic()
        lab.up()
        try:
            up_seconds[name] = round(time.monotonic() - begin, 1)
            if targets == LAB_TARGETS:
                results["produce_throughput"] = throughput(lab, records, repeats)
        finally:
            lab.down(purge=True)
    results["lab_up_seconds"] = {
        **up_seconds,
        "both_vs_3_9_only": round(up_seconds["both_clusters"] / up_seconds["kafka_3_9_only"], 2),
    }
    return results
