"""The Spark checker against the naive one (one process, a consumer and Python dicts).

For each scale N: produce N small v1 messages into a fresh topic as fast as a non-idempotent
producer can (linger, big batches, lz4), write the matching history, then time
:func:`eoslab.verify.checker.verify_run` and :func:`eoslab.verify.naive.check` on the same run
and report records/s and the ratio naive/spark. Both must find nothing; their counts are
compared, so a fast but wrong checker shows up here too.

Two floors under the Spark checker, each written into a no-op sink: ``spark_read_s`` reads and
parses the topic through Spark's Kafka source, nothing else; ``spark_ledger_s`` also brings the
records together with the history (the ledger's one shuffle, which any comparison of log and
history needs) without keeping them. The target: the whole check within
:data:`TARGET_OVER_LEDGER` times ``spark_ledger_s`` at the largest scale, reported as met or not
with the figures to judge it. The naive checker stays as the comparison point (``naive_over_
spark``); the old target, 5 times the naive one at 8M records on 2 cores, was retired: the floor
alone (reading the topic and one shuffle) takes a third of the naive checker's time there.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

from eoslab.clock import now_ms
from eoslab.message import FORMAT_TAG, SEPARATOR, Message, decode, encode_value
from eoslab.rundir import HISTORY_SCHEMA, Outcome, RunDir, RunInfo, SessionInfo
from eoslab.runtime.topology import LabConfig
from eoslab.verify import naive
from eoslab.verify.checker import verify_run
from eoslab.verify.history import read_history
from eoslab.verify.ledger import build_ledger
from eoslab.verify.spark_session import build_session
from eoslab.verify.topic_reader import classify, read_raw

DEFAULT_SCALES = [1_000_000, 2_000_000, 4_000_000, 8_000_000]
TARGET_OVER_LEDGER = 1.5
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
    """The constant head of every value of one partition: ``eos1|run|session|0|partition|``."""
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
        value = b"%s%d|%s|%d|" % (prefixes[partition], seq, key, seq // KEYS_PER_PARTITION)
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


def generate(bootstrap: str, root: Path, records: int) -> tuple[RunDir, float]:
    """A run directory of ``records`` clean records; and the seconds producing took."""
    run_id = f"bench-checker-{records}-{uuid.uuid4().hex[:6]}"
    topic = f"eos-{run_id}"
    sessions = [uuid.uuid4().hex for _ in range(PARTITIONS)]
    sample = Message(run_id, sessions[0], 0, 0, 0, "k0-0", 0)
    assert decode(b"k0-0", _value_prefix(run_id, sessions[0], 0) + b"0|k0-0|0|") == sample
    assert encode_value(sample) == _value_prefix(run_id, sessions[0], 0) + b"0|k0-0|0|"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(timeout=60)
    run = RunDir(root / run_id).create()
    started = now_ms()
    produce_s = _produce(bootstrap, topic, run_id, sessions, records)
    run.write_info(
        RunInfo(
            run_id=run_id,
            scenario="bench-checker",
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


def _delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([topic]).values():
        future.result(timeout=60)


def _time_floors(spark: SparkSession, run_dir: RunDir) -> tuple[float, float]:
    """Seconds to read and parse the run's topic, and to build its ledger, written nowhere."""
    info = run_dir.read_info()
    records = classify(read_raw(spark, info.bootstrap, info.topic, info.partitions), info.run_id)
    ledger = build_ledger(records, read_history(spark, run_dir.history_dir))
    seconds = []
    for frame in (records, ledger):
        started = time.perf_counter()
        frame.write.format("noop").mode("overwrite").save()
        seconds.append(time.perf_counter() - started)
    return seconds[0], seconds[1]


def _growth(results: list[dict[str, Any]], seconds: str) -> float | None:
    """Time multiplied per records multiplied, smallest to largest scale (1.0 is linear)."""
    if len(results) < 2:
        return None
    first, last = results[0], results[-1]
    return round((last[seconds] / first[seconds]) / (last["records"] / first["records"]), 2)


def run(scales: list[int], bootstrap: str | None = None) -> dict[str, Any]:
    """Time both checkers at each scale on the lab's Kafka (or ``bootstrap``)."""
    bootstrap = bootstrap or LabConfig().bootstrap_servers
    spark = build_session()
    results = []
    for records in scales:
        with tempfile.TemporaryDirectory(prefix="eoslab-bench-checker-") as root:
            run_dir, produce_s = generate(bootstrap, Path(root), records)
            read_s, ledger_s = _time_floors(spark, run_dir)
            started = time.perf_counter()
            verdict = verify_run(run_dir.path, spark=spark)
            spark_s = time.perf_counter() - started
            started = time.perf_counter()
            naive_result = naive.check(run_dir.path)
            naive_s = time.perf_counter() - started
            spark_counts = {c.name: c.observed for c in verdict.checks}
            results.append(
                {
                    "records": records,
                    "produce_s": round(produce_s, 2),
                    "produce_records_per_s": round(records / produce_s),
                    "spark_read_s": round(read_s, 2),
                    "spark_ledger_s": round(ledger_s, 2),
                    "spark_s": round(spark_s, 2),
                    "spark_records_per_s": round(records / spark_s),
                    "naive_s": round(naive_s, 2),
                    "naive_records_per_s": round(records / naive_s),
                    "naive_over_spark": round(naive_s / spark_s, 2),
                    "spark_over_ledger": round(spark_s / ledger_s, 2),
                    "conforms": verdict.conforms,
                    "counts_agree": all(
                        spark_counts.get(name) == count
                        for name, count in naive_result.counts.items()
                    ),
                }
            )
            _delete_topic(bootstrap, run_dir.read_info().topic)
    largest = results[-1] if results else None
    return {
        "partitions": PARTITIONS,
        "master": spark.sparkContext.master,
        "scales": results,
        "growth": {"spark": _growth(results, "spark_s"), "naive": _growth(results, "naive_s")},
        "target": {
            "spark_over_ledger": TARGET_OVER_LEDGER,
            "at_records": largest and largest["records"],
            "measured": largest and largest["spark_over_ledger"],
            "met": bool(largest and largest["spark_over_ledger"] <= TARGET_OVER_LEDGER),
        },
    }
