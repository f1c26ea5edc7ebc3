"""Many producer ids: the reference broker holds 100,000 idle idempotent producers with bounded
memory, and drops their state once they have been idle for producer.id.expiration.ms.

Each producer asks for its id (InitProducerId, a real allocation from the broker's id blocks)
and appends one batch to one partition of a topic of ``partitions``, as a short-lived client
would. Two waves of ``producers``: after the first, every producer is in DescribeProducers; the
periodic expiry check (producer.id.expiration.check.interval.ms) must then drop them all within
the expiry time and two check intervals; the second wave must not raise the broker's RSS much
above the first's (the memory of expired state is reused, not leaked).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from eoslab.probe.batches import record_batch
from eoslab.probe.client import KafkaProtocolClient
from eoslab.probe.requests import (
    describe_producers_request,
    init_producer_id_request,
    produce_request,
)
from eoslab.soak.broker import BrokerProcess
from eoslab.soak.malformed import Watch, server_figures
from eoslab.soak.witness import WITNESS_TOPIC, WitnessProducer

TOPIC = "soak-producer-ids"


@dataclass(frozen=True)
class ProducerIdParams:
    producers: int = 100_000
    """Producer ids per wave."""
    partitions: int = 16
    expiration_ms: int = 60_000
    """producer.id.expiration.ms of the broker under test (Kafka's default is a day)."""
    check_interval_ms: int = 1_000
    """producer.id.expiration.check.interval.ms (Kafka's default is ten minutes)."""
    witness_rate: float = 100.0
    """The witness producer keeps appending beside the waves: its state must never expire."""


def _active_producers(client: KafkaProtocolClient, partitions: int) -> set[int]:
    held: set[int] = set()
    for partition in range(partitions):
        response = client.request(describe_producers_request(TOPIC, partition))
        held |= {p.producer_id for p in response.topics[0].partitions[0].active_producers}
    return held


WINDOW = 250
"""Requests in flight on the connection: the waves are pipelined, as a busy client's are."""


def _wave(client: KafkaProtocolClient, params: ProducerIdParams, wave: int) -> tuple[set[int], int]:
    """(the producer ids that appended, appends refused)."""
    pids: set[int] = set()
    refused = 0
    for first in range(0, params.producers, WINDOW):
        numbers = range(first, min(first + WINDOW, params.producers))
        for _ in numbers:
            client.send(init_producer_id_request())
        ids = [client.receive() for _ in numbers]
        for n, answer in zip(numbers, ids, strict=True):
            batch = record_batch(
                answer.producer_id, answer.producer_epoch, 0, [f"{wave}/{n}".encode()]
            )
            client.send(produce_request(TOPIC, n % params.partitions, batch))
        for answer in ids:
            error = client.receive().responses[0].partition_responses[0].error_code
            if error.value:
                refused += 1
            else:
                pids.add(int(answer.producer_id))
    return pids, refused


def run_producer_ids(params: ProducerIdParams, workdir: Path) -> dict[str, object]:
    phase = workdir / "producer-ids"
    phase.mkdir(parents=True)
    broker = BrokerProcess(
        phase,
        fsync="os",
        options=(
            f"--producer-id-expiration-ms={params.expiration_ms}",
            f"--producer-id-expiration-check-interval-ms={params.check_interval_ms}",
        ),
    )
    broker.start()
    try:
        broker.create_topics((WITNESS_TOPIC,))
        broker.create_topics((TOPIC,), params.partitions)
        with broker.client(30.0) as client:
            witness = WitnessProducer(broker.bootstrap, params.witness_rate)
            waves = []
            with Watch(broker) as watch:
                witness.start()
                for wave in (1, 2):
                    begin = time.monotonic()
                    pids, refused = _wave(client, params, wave)
                    written_s = time.monotonic() - begin
                    rss_held = broker.rss_bytes()
                    held = _active_producers(client, params.partitions)
                    deadline = time.monotonic() + 3 * params.expiration_ms / 1000 + 30
                    left = held & pids
                    while left and time.monotonic() < deadline:
                        time.sleep(params.check_interval_ms / 1000)
                        left = _active_producers(client, params.partitions) & pids
                    waves.append(
                        {
                            "producers": params.producers,
                            "appended": len(pids),
                            "refused": refused,
                            "seconds": round(written_s, 1),
                            "producers_per_s": round(len(pids) / written_s),
                            "held_after_wave": len(held & pids),
                            "rss_mb_holding_them": round((rss_held or 0) / 2**20, 1),
                            "left_after_expiry": len(left),
                            "expired_after_s": round(time.monotonic() - begin - written_s, 1),
                        }
                    )
                witness.stop()
            witness_check = witness.check(client)
            servers = {broker.name: server_figures(broker, watch, broker.alive())}
    finally:
        if broker.alive():
            broker.stop()
    first, second = waves
    return {
        "parameters": params.__dict__,
        "waves": waves,
        "rss_growth_second_wave": round(
            second["rss_mb_holding_them"] / max(first["rss_mb_holding_them"], 0.1), 3
        ),
        "servers": servers,
        "witness": witness_check.figures(),
    }
