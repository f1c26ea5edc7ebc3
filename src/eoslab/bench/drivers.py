"""Client drivers' produce throughput beside librdkafka's: the same idempotent acks=all producer
(1 KiB values, partition 0, through the chaos proxy, one broker) on every client of the lab, each
as the roles have it (:class:`~eoslab.workload.drivers.api.ClientApi`: a driver program's
producer is spoken to with the line protocol), so a figure includes what a cell pays for the
driver. Issue 29's target: no driver below half of librdkafka's rate (a driver must not be the
bottleneck of a cell).

The settings are those every client translates, ``batch.size`` among them at librdkafka's
default (1,000,000 bytes; Kafka's Java client defaults to 16,384, which alone holds it to a
tenth of librdkafka's rate through the proxy here: a client default, not the driver's cost).
"""

from __future__ import annotations

from eoslab.bench.produce_throughput import VALUE_BYTES, best_of, new_topic
from eoslab.clients import MATRIX_DRIVERS
from eoslab.runtime.local import LocalRuntime
from eoslab.workload.drivers.api import ClientApi
from eoslab.workload.drivers.registry import default_client, prepare

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
    results: dict[str, object] = {
        "value_bytes": VALUE_BYTES,
        "producer_settings": SETTINGS,
        str(default_client()): baseline,
    }
    for ref in MATRIX_DRIVERS:
        client = ClientApi(prepare(ref))
        try:
            rate = best_of(repeats, bootstrap, topic, records, client=client, settings=SETTINGS)
        finally:
            client.close()
        ratio = round(rate["records_per_s"] / baseline["records_per_s"], 3)
        results[str(ref)] = {**rate, "vs_librdkafka": ratio, "target": f">= {TARGET_RATIO}"}
    return results
