"""The real 3-broker cluster: idempotent produce and read-back, and a leader killed mid-stream."""

from __future__ import annotations

import threading
import time

from confluent_kafka.admin import AdminClient

from eoslab.admin import create_topic
from eoslab.runtime import smoke
from eoslab.runtime.local import LocalRuntime


def test_idempotent_producer_round_trip(lab: LocalRuntime) -> None:
    bootstrap = lab.config.bootstrap_servers
    create_topic(bootstrap, "round-trip", partitions=3, replication=3)
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics("round-trip", timeout=10)
    assert all(len(p.replicas) == 3 for p in meta.topics["round-trip"].partitions.values())

    ledger = smoke.produce(bootstrap, "round-trip", partitions=3, count=3000)
    findings = smoke.check(ledger, smoke.consume(bootstrap, "round-trip", partitions=3))

    assert len(ledger.acked) == 3000
    assert ledger.failed == {}
    assert findings.read == 3000
    assert findings.ok, findings


def test_leader_kill_while_producing(lab: LocalRuntime) -> None:
    bootstrap = lab.config.bootstrap_servers
    create_topic(bootstrap, "leader-kill", partitions=1, replication=3)
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def leader() -> int:
        """The partition's leader once metadata names one (a broker may still lag behind)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            topic = admin.list_topics("leader-kill", timeout=10).topics["leader-kill"]
            if 0 in topic.partitions and topic.partitions[0].leader >= 0:
                return topic.partitions[0].leader
            time.sleep(0.2)
        raise TimeoutError("no leader for leader-kill/0 after 60 s")

    victim = leader()
    killed_at: list[float] = []
    half = threading.Event()

    def kill_at_half() -> None:
        half.wait(120)
        lab.kill(f"kafka-{victim}")
        killed_at.append(time.monotonic())

    killer = threading.Thread(target=kill_at_half)
    killer.start()
    count = 6000

    def paced(ledger: smoke.Ledger) -> None:
        # A bounded window and a slow pace, so the kill lands mid-stream.
        if len(ledger.acked) >= count // 2:
            half.set()
        time.sleep(0.0005)

    ledger = smoke.produce(
        bootstrap,
        "leader-kill",
        partitions=1,
        count=count,
        overrides={"linger.ms": 20, "message.timeout.ms": 120000},
        during=paced,
        max_unacked=500,
    )
    killer.join()
    try:
        new_leader = leader()
        assert new_leader != victim
        assert ledger.failed == {}
        assert len(ledger.acked) == count
        # Production went on after the kill: records acknowledged after it, by the new leader.
        assert sum(t > killed_at[0] for t in ledger.ack_times.values()) > 0
        findings = smoke.check(ledger, smoke.consume(bootstrap, "leader-kill", partitions=1))
        assert findings.ok, findings
    finally:
        lab.restart(f"kafka-{victim}")
    assert lab.wait_healthy([f"kafka-{victim}"], timeout_s=60)
