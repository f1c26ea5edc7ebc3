"""A clean run written at full speed: N small records spread over the partitions of a fresh
topic by a plain (non-idempotent, batching) producer, with the matching history, as if a run
had produced them. The checker's bench measures the checker on it; the warm Spark's warm-up
checks one so that the first real check finds its classes loaded."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from eoslab.clock import now_ms
from eoslab.message import FORMAT_TAG, SEPARATOR, Message, decode, encode_value, signed
from eoslab.rundir import HISTORY_SCHEMA, Outcome, RunDir, RunInfo, SessionInfo, run_topic

PARTITIONS = 6
KEYS_PER_PARTITION = 8
PRODUCER_SETTINGS = {
    "enable.idempotence": False,
    "acks": 1,
    "retries": 0,  # a failed send must surface, not be resent out of order
    "linger.ms": 50,
    "batch.size": 1_000_000,
    "batch.num.messages": 100_000,
    "compression.type": "lz4",
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "delivery.report.only.error": True,
}


def _value_prefix(run_id: str, session_id: str, partition: int) -> bytes:
    """The constant head of every value of one partition: ``eos2|run|session|0|partition|``."""
    return SEPARATOR.join((FORMAT_TAG, run_id, session_id, "0", str(partition), "")).encode()


def _produce(bootstrap: str, topic: str, run_id: str, sessions: list[str], records: int) -> float:
    """Spread ``records`` over the partitions, in sequence order; seconds taken."""
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_SETTINGS})
    failures: list[str] = []

    def on_error(error: object, _message: object) -> None:
        failures.append(str(error))

    prefixes = [_value_prefix(run_id, s, p) for p, s in enumerate(sessions)]
    keys = [[f"k{p}-{k}".encode() for k in range(KEYS_PER_PARTITION)] for p in range(PARTITIONS)]
    started = time.perf_counter()
    for index in range(records):
        partition, seq = index % PARTITIONS, index // PARTITIONS
        key = keys[partition][seq % KEYS_PER_PARTITION]
        value = signed(b"%s%d|%s|%d|" % (prefixes[partition], seq, key, seq // KEYS_PER_PARTITION))
        while True:
            try:
                producer.produce(
                    topic, key=key, value=value, partition=partition, on_delivery=on_error
                )
                break
            except BufferError:
                producer.poll(0.05)
        if index % 10_000 == 0:
            producer.poll(0)
    if producer.flush(600) or failures:
        raise KafkaException(f"{topic}: generation failed: {failures[:3]}")
    return time.perf_counter() - started


def _history(run_id: str, sessions: list[str], records: int) -> pa.Table:
    """One acknowledged row per record; offsets follow from the order (a fresh topic)."""
    index = np.arange(records, dtype=np.int64)
    partition = (index % PARTITIONS).astype(np.int32)
    seq = index // PARTITIONS
    key_index = partition.astype(np.int64) * KEYS_PER_PARTITION + seq % KEYS_PER_PARTITION
    key_names = pa.array(
        [f"k{p}-{k}" for p in range(PARTITIONS) for k in range(KEYS_PER_PARTITION)]
    )
    send_ms = now_ms() + index // 1000
    return pa.table(
        {
            "run_id": pa.array(np.full(records, run_id, dtype=object), pa.string()),
            "session_id": pa.DictionaryArray.from_arrays(partition, pa.array(sessions)).cast(
                pa.string()
            ),
            "producer": pa.array(np.zeros(records, dtype=np.int32)),
            "partition": pa.array(partition),
            "seq": pa.array(seq),
            "key": pa.DictionaryArray.from_arrays(key_index, key_names).cast(pa.string()),
            "key_seq": pa.array(seq // KEYS_PER_PARTITION),
            "send_ms": pa.array(send_ms),
            "outcome": pa.array(np.full(records, Outcome.ACK.value, dtype=object), pa.string()),
            "offset": pa.array(seq),
            "error": pa.nulls(records, pa.string()),
            "ack_ms": pa.array(send_ms + 5),
            "latency_ms": pa.array(np.full(records, 5.0)),
        },
        schema=HISTORY_SCHEMA,
    )


def generate(
    bootstrap: str, root: Path, records: int, name: str = "bench-checker"
) -> tuple[RunDir, float]:
    """A run directory (scenario ``name``) of ``records`` clean records; and the seconds
    producing took."""
    run_id = f"{name}-{records}-{uuid.uuid4().hex[:6]}"
    topic = run_topic(run_id)
    sessions = [uuid.uuid4().hex for _ in range(PARTITIONS)]
    sample = Message(run_id, sessions[0], 0, 0, 0, "k0-0", 0)
    value = signed(_value_prefix(run_id, sessions[0], 0) + b"0|k0-0|0|")
    assert decode(b"k0-0", value) == sample
    assert encode_value(sample) == value
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(timeout=60)
    run = RunDir(root / run_id).create()
    started = now_ms()
    produce_s = _produce(bootstrap, topic, run_id, sessions, records)
    run.write_info(
        RunInfo(
            run_id=run_id,
            scenario=name,
            target="external",
            bootstrap=bootstrap,
            topic=topic,
            partitions=PARTITIONS,
            seed=0,
            started_ms=started,
            ended_ms=now_ms(),
            sessions=[SessionInfo(session_id=s, producer=0, started_ms=started) for s in sessions],
        )
    )
    pq.write_table(_history(run_id, sessions, records), run.history_file(0, "bench", 0))
    return run, produce_s
