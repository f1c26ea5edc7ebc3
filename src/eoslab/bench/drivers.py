"""Client drivers' produce throughput beside librdkafka's: the same idempotent acks=all producer
(1 KiB values, partition 0, through the chaos proxy, one broker) on every client of the lab, each
as the roles have it (:class:`~eoslab.workload.drivers.api.ClientApi`: a driver program's
producer is spoken to with the line protocol), so a figure includes what a cell pays for the
driver. Issue 29's target: no driver below half of librdkafka's rate (a driver must not be the
bottleneck of a cell).

The settings are those every client translates (librdkafka's ``batch.size`` has no equivalent
in Kafka's Java client or franz-go): each client batches as it does by default otherwise.
"""

from __future__ import annotations

from eoslab.bench.produce_throughput import VALUE_BYTES, best_of, new_topic
from eoslab.clients import parse_client
from eoslab.runtime.local import LocalRuntime
from eoslab.workload.drivers.api import ClientApi
from eoslab.workload.drivers.registry import default_client, prepare

DRIVERS = ("java:3.9.2", "franz-go:v1.22.2")
SETTINGS: dict[str, object] = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
    "compression.type": "none",
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
    for name in DRIVERS:
        client = ClientApi(prepare(parse_client(name)))
        try:
            rate = best_of(repeats, bootstrap, topic, records, client=client, settings=SETTINGS)
        finally:
            client.close()
        ratio = round(rate["records_per_s"] / baseline["records_per_s"], 3)
        results[name] = {**rate, "vs_librdkafka": ratio, "target": f">= {TARGET_RATIO}"}
    return results
