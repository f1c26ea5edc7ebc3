"""Idempotent produce throughput: reference broker vs one Kafka broker, and proxy vs direct.

Same confluent-kafka settings for every target (enable.idempotence, acks=all, 1 KiB values);
durability matched pairwise: the reference broker with `--fsync os` against Kafka's default
(page cache, no fsync), and with `--fsync every-batch` against a Kafka topic with
`flush.messages=1`.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from eoslab.bench.lab_phases import busy_cpu_s
from eoslab.clock import wait_until
from eoslab.runtime.health import port_open
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.ports import free_port
from eoslab.workload.drivers.api import ClientApi

VALUE_BYTES = 1024
SETTINGS = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "compression.type": "none",
}


def measure(
    bootstrap: str,
    topic: str,
    records: int,
    *,
    client: ClientApi | None = None,
    settings: dict[str, object] = SETTINGS,
) -> dict[str, float]:
    """Send `records` values of 1 KiB to partition 0 as fast as the client allows (`client`: a
    session's client as the roles have it, a driver program's too; None: librdkafka here)."""
    producer = (client or ClientApi(None)).producer({"bootstrap.servers": bootstrap, **settings})
    value = b"x" * VALUE_BYTES
    failures = 0

    def report(error: object, _message: object) -> None:
        nonlocal failures
        failures += error is not None

    producer.produce(topic, value=value, partition=0, on_delivery=report)  # PID, metadata, warm
    producer.flush(30)
    busy = busy_cpu_s()
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value=value, partition=0, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(120):
        raise TimeoutError(f"records undelivered to {bootstrap} after 120 s")
    seconds = time.perf_counter() - start
    busy = busy_cpu_s() - busy
    if failures:
        raise RuntimeError(f"{failures} records failed on {bootstrap}")
    return {
        "records": records,
        "seconds": round(seconds, 3),
        "records_per_s": round(records / seconds),
        "mb_per_s": round(records * VALUE_BYTES / seconds / 1e6, 2),
        # the whole machine's CPU (client, its driver, the proxy, the broker): what a record
        # costs when every core is busy
        "cpu_us_per_record": round(busy / records * 1e6, 2),
    }


def best_of(
    repeats: int,
    bootstrap: str,
    topic: str,
    records: int,
    *,
    client: ClientApi | None = None,
    settings: dict[str, object] = SETTINGS,
) -> dict[str, Any]:
    """The median run of several, with the spread, so one noisy neighbour does not decide."""
    return median_run(
        [
            measure(bootstrap, topic, records, client=client, settings=settings)
            for _ in range(repeats)
        ]
    )


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of ``runs`` by rate, with every run's rate and their spread."""
    rates = [r["records_per_s"] for r in runs]
    median = sorted(runs, key=lambda r: r["records_per_s"])[len(runs) // 2]
    return {
        **median,
        "runs_records_per_s": rates,
        "stdev_records_per_s": round(statistics.pstdev(rates)),
    }


def new_topic(bootstrap: str, config: dict[str, str] | None = None, replication: int = 1) -> str:
    """A one-partition topic, one replica unless told: one broker does all the work."""
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, replication, config=config or {})])[topic].result(60)
    return topic


@contextmanager
def refbroker(fsync: str, workdir: Path) -> Iterator[str]:
    """A reference broker of the benchmark's own, reached directly (no proxy), like Kafka's."""
    port, control = free_port(), free_port()
    data = workdir / f"refbroker-{fsync}"
    argv = [
        sys.executable,
        "-m",
        "eoslab.refbroker",
        "serve",
        f"--listen=127.0.0.1:{port}",
        f"--advertised=127.0.0.1:{port}",
        f"--control=127.0.0.1:{control}",
        f"--data-dir={data}",
        f"--fsync={fsync}",
    ]
    with (workdir / f"refbroker-{fsync}.log").open("wb") as log:
        server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        if not wait_until(lambda: port_open(port), 30):
            raise RuntimeError(f"the reference broker did not start; see {log.name}")
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(30)


def run(lab: LocalRuntime, records: int = 50_000, repeats: int = 3) -> dict[str, object]:
    """`lab` is one Kafka broker with a DIRECT listener beside the proxied one."""
    config = lab.config
    kafka_direct = config.direct_bootstrap_servers
    results: dict[str, object] = {"value_bytes": VALUE_BYTES, "producer_settings": SETTINGS}

    # Proxy overhead: the same broker reached through its chaos proxy and directly.
    topic = new_topic(kafka_direct)
    direct = best_of(repeats, kafka_direct, topic, records)
    proxied = best_of(repeats, config.bootstrap_servers, topic, records)
    results["proxy_vs_direct"] = {
        "direct": direct,
        "through_proxy": proxied,
        "ratio": round(proxied["records_per_s"] / direct["records_per_s"], 3),
        "target": ">= 0.9",
    }

    # Reference broker against one Kafka broker, at matching durability.
    for fsync, kafka_topic_config in (("os", {}), ("every-batch", {"flush.messages": "1"})):
        kafka = best_of(repeats, kafka_direct, new_topic(kafka_direct, kafka_topic_config), records)
        with refbroker(fsync, config.state_dir) as ref_bootstrap:
            ref = best_of(repeats, ref_bootstrap, new_topic(ref_bootstrap), records)
        results[f"refbroker_vs_kafka_fsync_{fsync}"] = {
            "kafka": kafka,
            "refbroker": ref,
            "ratio": round(ref["records_per_s"] / kafka["records_per_s"], 3),
        }
    return results
