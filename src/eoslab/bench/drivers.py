"""Client drivers' produce throughput beside librdkafka's: the same idempotent acks=all producer
(1 KiB values, partition 0, through the chaos proxy, one broker) on every client of the lab, each
as the roles have it (:class:`~eoslab.workload.drivers.api.ClientApi`: a driver program's
producer is spoken to with the line protocol), so a figure includes what a cell pays for the
driver. Issue 29's target: no driver below half of librdkafka's rate (a driver must not be the
bottleneck of a cell).

The settings are those every client translates, ``batch.size`` among them at librdkafka's
default (1,000,000 bytes; Kafka's Java client defaults to 16,384, which alone holds it to a
tenth of librdkafka's rate through the proxy here: a client default, not the driver's cost).

Beside each driver's rate, its client's own (``client_alone``): the driver program sending by
itself, the line protocol left out. Where that is below the target, the client itself is the
floor on this machine, not the driver. And the CPU a record costs on the whole machine, each
run's (``cpu_us_per_record``) and librdkafka's over the driver's (``cpu_floor_ratio``): where
every core is busy, that is the most the driver's ratio can be (with two cores, the Python
session and the Java client together cost more a record than librdkafka in Python in all).
And each driver's rate against the catalogue's fastest producer session
(``headroom_over_fastest_cell``): how far a cell is from being held back by it.
"""

from __future__ import annotations

from typing import Any

from eoslab.bench.produce_throughput import VALUE_BYTES, best_of, new_topic
from eoslab.clients import MATRIX_DRIVERS
from eoslab.runtime.local import LocalRuntime
from eoslab.scenarios.catalogue import catalogue, load_scenario
from eoslab.workload.drivers.api import ClientApi
from eoslab.workload.drivers.registry import default_client, prepare
from eoslab.workload.drivers.remote import RemoteProducer

SETTINGS: dict[str, object] = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
    "compression.type": "none",
    "batch.size": 1_000_000,
}
TARGET_RATIO = 0.5


def run(lab: LocalRuntime, records: int, repeats: int) -> dict[str, object]:
    bootstrap = lab.config.bootstrap_servers
    topic = new_topic(bootstrap)
    baseline = best_of(repeats, bootstrap, topic, records, settings=SETTINGS)
    fastest = fastest_producer()
    results: dict[str, object] = {
        "value_bytes": VALUE_BYTES,
        "producer_settings": SETTINGS,
        "fastest_cell_producer": fastest,
        str(default_client()): baseline,
    }
    for ref in MATRIX_DRIVERS:
        client = ClientApi(prepare(ref))
        try:
            rate = best_of(repeats, bootstrap, topic, records, client=client, settings=SETTINGS)
            alone = client_alone(client, bootstrap, topic, records, repeats)
        finally:
            client.close()
        results[str(ref)] = {
            **rate,
            **judge(rate, baseline, alone),
            "headroom_over_fastest_cell": round(rate["records_per_s"] / fastest["rate"], 1),
        }
    return results


def judge(
    rate: dict[str, Any], baseline: dict[str, Any], alone: dict[str, Any]
) -> dict[str, object]:
    """A driver's rate against librdkafka's and the target, and the two floors that can hold
    it below the target on this machine: its client sending alone (the most any driver of that
    client could reach), and the CPU a record costs on the whole machine (client, driver,
    proxy, broker): were both runs to keep every core busy, the driver's rate could be at most
    librdkafka's CPU a record over its own times librdkafka's rate (``cpu_floor_ratio``)."""
    ratio = round(rate["records_per_s"] / baseline["records_per_s"], 3)
    alone_ratio = round(alone["records_per_s"] / baseline["records_per_s"], 3)
    cpu_floor = round(baseline["cpu_us_per_record"] / rate["cpu_us_per_record"], 3)
    return {
        "vs_librdkafka": ratio,
        "target": f">= {TARGET_RATIO}",
        "met": ratio >= TARGET_RATIO,
        "client_alone": {**alone, "vs_librdkafka": alone_ratio},
        "cpu_floor_ratio": cpu_floor,
        "floor_below_target": alone_ratio < TARGET_RATIO or cpu_floor < TARGET_RATIO,
    }


def fastest_producer() -> dict[str, object]:
    """The catalogue's fastest producer session (each session runs a driver program of its
    own): what a driver must keep up with in a cell."""
    rate, name = max(
        (scenario.workload.rate, name)
        for name, scenario in ((name, load_scenario(path)) for name, path in catalogue().items())
    )
    return {"scenario": name, "rate": rate}


def client_alone(
    client: ClientApi, bootstrap: str, topic: str, records: int, repeats: int
) -> dict[str, object]:
    """The driver's client sending by itself (:meth:`RemoteProducer.burst`), the same settings,
    after a warm-up burst: the most any driver of that client could reach here — the floor of
    the target when it is below it."""
    producer = client.producer({"bootstrap.servers": bootstrap, **SETTINGS})
    assert isinstance(producer, RemoteProducer)
    producer.burst(topic, 0, min(records, 5_000), VALUE_BYTES)
    runs = [producer.burst(topic, 0, records, VALUE_BYTES) for _ in range(repeats)]
    if any(run["failed"] for run in runs):
        raise RuntimeError(f"{client.launch}: records failed when sent by the client alone")
    rates = sorted(round(records / run["seconds"]) for run in runs)
    return {"records_per_s": rates[len(rates) // 2], "runs_records_per_s": rates}
