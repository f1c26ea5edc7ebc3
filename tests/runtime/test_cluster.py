"""The real 3-broker cluster: idempotent produce and read-back (a leader killed mid-stream is the
catalogue's leader-kill, checked with its fault evidence in tests/scenarios/test_catalogue.py)."""

from __future__ import annotations

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
