"""Load through the chaos proxy: a sustained idempotent stream (1 GiB of record values by
default, uncompressed and lz4) sent to the reference broker directly and through a proxy in
front of it, one after the other in the same run, so the proxy's overhead is a ratio of two
figures measured minutes apart on the same machine. The proxy's and the broker's RSS are
sampled throughout; every acknowledged record must be in the log (end offsets equal the acks).

The broker runs with ``--fsync os``: the figure is the proxy's, not the disk's.
"""

from __future__ import annotations

import contextlib
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer

from eoslab.admin import end_offsets
from eoslab.soak.broker import BrokerProcess, ProxyProcess, ServerProcess
from eoslab.soak.malformed import Watch, server_figures

MIB = 2**20
FLUSH_TIMEOUT_S = 120.0
VARIANTS = 64
"""Distinct value bodies, drawn from a seeded vocabulary: lz4 finds repeats in each value
(as in log lines or JSON) but not one value repeated end to end."""
WORDS = (
    "offset",
    "epoch",
    "leader",
    "replica",
    "fetch",
    "produce",
    "commit",
    "abort",
    "marker",
    "sequence",
    "batch",
    "segment",
    "partition",
    "topic",
    "group",
    "member",
    "session",
    "coordinator",
    "timeout",
    "retry",
    "fence",
    "idempotent",
)


@dataclass(frozen=True)
class LoadParams:
    mebibytes: int = 1024
    """Record values per stream (one stream per compression and per path)."""
    value_bytes: int = 16_384
    partitions: int = 4
    compressions: tuple[str, ...] = ("none", "lz4")
    seed: int = 0
    max_seconds: float = 300.0
    """Per stream: no record is sent after this long (the bytes sent are reported)."""


def _values(params: LoadParams) -> list[bytes]:
    rng = random.Random(params.seed)
    bodies = []
    for _ in range(VARIANTS):
        text = " ".join(rng.choice(WORDS) + str(rng.randrange(10_000)) for _ in range(4096))
        bodies.append(text.encode()[: params.value_bytes])
    return bodies


@dataclass
class _Acks:
    acked: int = 0
    failed: int = 0

    def on_delivery(self, error: KafkaError | None, _message: Message) -> None:
        if error is None:
            self.acked += 1
        else:
            self.failed += 1


@dataclass(frozen=True)
class StreamFigures:
    records: int
    mebibytes: float
    seconds: float
    mib_per_s: float
    acknowledged: int
    failed: int
    undelivered: int
    in_log: int
    stopped_by_time: bool

    @property
    def lost(self) -> int:
        """Acknowledged records missing from the log (each record is its own offset)."""
        return max(0, self.acknowledged - self.in_log)


def _stream(
    target: ServerProcess, broker: BrokerProcess, topic: str, params: LoadParams, compression: str
) -> StreamFigures:
    """Send the values as fast as the client is acknowledged; the figures of one stream."""
    broker.create_topics((topic,), params.partitions)
    bodies = _values(params)
    acks = _Acks()
    producer = Producer(
        {
            "bootstrap.servers": target.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 10,
            "batch.size": 1_000_000,
            "compression.type": compression,
            "message.max.bytes": 2_000_000,
        }
    )
    records = params.mebibytes * MIB // params.value_bytes
    begin = time.monotonic()
    deadline = begin + params.max_seconds
    sent = 0
    while sent < records and time.monotonic() < deadline:
        value = b"%d " % sent + bodies[sent % VARIANTS]
        try:
            producer.produce(
                topic, value, partition=sent % params.partitions, on_delivery=acks.on_delivery
            )
        except BufferError:
            producer.poll(0.05)
            continue
        sent += 1
        producer.poll(0)
    undelivered = producer.flush(FLUSH_TIMEOUT_S)
    seconds = time.monotonic() - begin
    in_log = sum(end_offsets(broker.bootstrap, topic, params.partitions).values())
    return StreamFigures(
        records=sent,
        mebibytes=round(sent * params.value_bytes / MIB, 1),
        seconds=round(seconds, 1),
        mib_per_s=round(sent * params.value_bytes / MIB / seconds, 1),
        acknowledged=acks.acked,
        failed=acks.failed,
        undelivered=undelivered,
        in_log=in_log,
        stopped_by_time=sent < records,
    )


def run_load(params: LoadParams, workdir: Path) -> dict[str, object]:
    phase = workdir / "load"
    phase.mkdir(parents=True)
    broker = BrokerProcess(phase, fsync="os")
    proxy = ProxyProcess(phase, upstream=broker.port)
    streams: dict[str, StreamFigures] = {}
    broker.start()
    try:
        proxy.start()
        with contextlib.ExitStack() as stack:
            watches = {s.name: stack.enter_context(Watch(s)) for s in (proxy, broker)}
            for compression in params.compressions:
                for path, target in (("direct", broker), ("via_proxy", proxy)):
                    topic = f"soak-load-{compression}-{path.replace('_', '-')}"
                    streams[f"{compression}/{path}"] = _stream(
                        target, broker, topic, params, compression
                    )
        servers = {
            server.name: server_figures(server, watches[server.name], server.alive())
            for server in (proxy, broker)
        }
    finally:
        for server in (proxy, broker):
            if server.alive():
                server.stop()
    overhead = {
        compression: round(
            streams[f"{compression}/via_proxy"].mib_per_s
            / max(streams[f"{compression}/direct"].mib_per_s, 0.1),
            3,
        )
        for compression in params.compressions
    }
    return {
        "parameters": {**params.__dict__, "compressions": list(params.compressions)},
        "streams": {name: {**asdict(f), "lost": f.lost} for name, f in streams.items()},
        "proxy_over_direct": overhead,
        "servers": servers,
    }
