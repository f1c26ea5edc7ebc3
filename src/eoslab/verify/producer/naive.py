"""The producer half of the naive checker (:mod:`eoslab.verify.naive`): the run's records in the
log (from the topic, or from the copy a check kept) and in the history, and the producer
anomalies counted from them with Python dicts (definitions in
:mod:`eoslab.verify.producer.anomalies`)."""

from __future__ import annotations

import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from eoslab.message import CorruptMessageError, MessageFormatError, decode
from eoslab.rundir import CORRUPT, FOREIGN, MISPLACED, PRODUCER_ANOMALIES, Outcome
from eoslab.verify.producer.history import EXCUSED_OUTCOMES, NOT_ACKED_OUTCOMES

BATCH = 10_000


@dataclass(frozen=True)
class LogRecord:
    partition: int
    offset: int
    session_id: str
    seq: int
    key: str
    key_seq: int


@dataclass(frozen=True)
class OtherRecord:
    """A record of the log that is not one of the run's records: why (``foreign``, or a flaw
    of a record of the run: ``misplaced``, ``corrupt``), and where."""

    partition: int
    offset: int
    reason: str


def read_log(
    bootstrap: str, topic: str, partitions: int, run_id: str, timeout_s: float = 600.0
) -> tuple[list[LogRecord], list[OtherRecord]]:
    """The run's records in (partition, offset) order, and every other record of the log. A
    partition is read once its record at the end offset's predecessor came, or the end of the
    partition did (a topic written in transactions ends in a marker, which is no record)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"eoslab-naive-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_uncommitted",  # the whole log, as Spark's source reads it
            "queued.min.messages": 100_000,
        }
    )
    try:
        ends: dict[int, int] = {}
        starts = []
        for partition in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            if high > low:
                ends[partition] = high
                starts.append(TopicPartition(topic, partition, low))
        consumer.assign(starts)
        by_partition: dict[int, list[LogRecord]] = defaultdict(list)
        others: list[OtherRecord] = []
        deadline = time.monotonic() + timeout_s
        while ends:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: partitions {sorted(ends)} not read in {timeout_s} s")
            for message in consumer.consume(BATCH, timeout=1.0):
                error = message.error()
                where, offset = message.partition(), message.offset()
                if where is None or offset is None:
                    continue
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    if offset >= ends.get(where, 0):
                        ends.pop(where, None)
                    continue
                if error is not None:
                    raise KafkaException(error)
                if where not in ends or offset >= ends[where]:
                    continue
                if offset == ends[where] - 1:
                    del ends[where]
                record = classify_record(message.key(), message.value(), where, offset, run_id)
                if isinstance(record, OtherRecord):
                    others.append(record)
                else:
                    by_partition[where].append(record)
        return [r for p in sorted(by_partition) for r in by_partition[p]], others
    finally:
        consumer.close()


def read_kept_log(topic_dir: Path, run_id: str) -> tuple[list[LogRecord], list[OtherRecord]]:
    """:func:`read_log`'s answer from the copy of the topic a check kept in the run directory."""
    log: list[LogRecord] = []
    others: list[OtherRecord] = []
    for row in kept_rows(topic_dir):
        record = classify_record(row["key"], row["value"], row["partition"], row["offset"], run_id)
        if isinstance(record, OtherRecord):
            others.append(record)
        else:
            log.append(record)
    return log, others


def kept_rows(folder: Path) -> list[dict[str, Any]]:
    """A kept topic's records (partition, offset, key, value) in (partition, offset) order."""
    table = pq.read_table(folder, columns=["partition", "offset", "key", "value"])
    return sorted(table.to_pylist(), key=lambda row: (row["partition"], row["offset"]))


def classify_record(
    key: bytes | None, value: bytes | None, partition: int, offset: int, run_id: str
) -> LogRecord | OtherRecord:
    """The run's record at (partition, offset), or why it is not one."""
    try:
        message = decode(key, value)
    except CorruptMessageError as corrupt:
        reason = CORRUPT if corrupt.message.run_id == run_id else FOREIGN
        return OtherRecord(partition, offset, reason)
    except MessageFormatError:
        return OtherRecord(partition, offset, FOREIGN)
    if message.run_id != run_id:
        return OtherRecord(partition, offset, FOREIGN)
    if message.partition != partition:
        return OtherRecord(partition, offset, MISPLACED)
    return LogRecord(
        partition, offset, message.session_id, message.seq, message.key, message.key_seq
    )


def read_history(
    history_dir: Path, log_starts: Mapping[int, int] | None = None
) -> Iterator[tuple[str, int, int, str, int, str]]:
    """(session_id, partition, seq, key, key_seq, outcome) of every history row; an
    acknowledged record below its partition's ``log_starts`` offset (moved by a delete-records
    step) is ``deleted`` (see :func:`eoslab.verify.producer.history.read_history`)."""
    if not any(history_dir.glob("*.parquet")):
        return
    columns = ("session_id", "partition", "seq", "key", "key_seq", "outcome", "offset")
    table = pq.read_table(history_dir, columns=list(columns)).to_pydict()
    starts = log_starts or {}
    for session_id, partition, seq, key, key_seq, outcome, offset in zip(
        *(table[c] for c in columns), strict=True
    ):
        deleted = (
            outcome == Outcome.ACK and offset is not None and offset < starts.get(partition, -1)
        )
        yield session_id, partition, seq, key, key_seq, Outcome.DELETED if deleted else outcome


def excuse_aborted(
    history: Iterable[tuple[str, int, int, str, int, str]], aborted: set[tuple[str, int, int]]
) -> Iterator[tuple[str, int, int, str, int, str]]:
    """The history rows, a record of an aborted transaction that was not acknowledged
    ``aborted`` (see :func:`eoslab.verify.producer.history.excuse_aborted`)."""
    for session_id, partition, seq, key, key_seq, outcome in history:
        excused = outcome != Outcome.ACK and (session_id, partition, seq) in aborted
        yield session_id, partition, seq, key, key_seq, Outcome.ABORTED if excused else outcome


def _missing(present: set[int], excused: set[int]) -> int:
    """Sequences below the highest present one, neither present nor excused."""
    return sum(1 for s in range(max(present)) if s not in present and s not in excused)


def count_anomalies(
    log: Iterable[LogRecord], history: Iterable[tuple[str, int, int, str, int, str]]
) -> dict[str, int]:
    """Every anomaly count, from records in (partition, offset) order and the history rows."""
    outcome_of: dict[tuple[str, int, int], str] = {}
    excused: dict[tuple[str, int], set[int]] = defaultdict(set)
    key_excused: dict[tuple[str, str], set[int]] = defaultdict(set)
    for session_id, partition, seq, key, key_seq, outcome in history:
        outcome_of[(session_id, partition, seq)] = outcome
        if outcome in EXCUSED_OUTCOMES:
            excused[(session_id, partition)].add(seq)
            key_excused[(session_id, key)].add(key_seq)

    counts = Counter(dict.fromkeys(PRODUCER_ANOMALIES, 0))
    copies: Counter[tuple[str, int, int]] = Counter()
    key_copies: Counter[tuple[str, str, int]] = Counter()
    present: dict[tuple[str, int], set[int]] = defaultdict(set)
    key_present: dict[tuple[str, str], set[int]] = defaultdict(set)
    highest: dict[tuple[str, int], int] = {}
    key_highest: dict[tuple[str, str, int], int] = {}
    for r in log:
        identity = (r.session_id, r.partition, r.seq)
        copies[identity] += 1
        key_copies[(r.session_id, r.key, r.key_seq)] += 1
        known = outcome_of.get(identity)
        if known is None:
            counts["phantom"] += 1
            continue
        present[(r.session_id, r.partition)].add(r.seq)
        key_present[(r.session_id, r.key)].add(r.key_seq)
        if copies[identity] == 1:
            counts["indeterminate"] += known in NOT_ACKED_OUTCOMES
            stream = (r.session_id, r.partition)
            counts["reorder"] += r.seq < highest.get(stream, -1)
            highest[stream] = max(highest.get(stream, -1), r.seq)
        if key_copies[(r.session_id, r.key, r.key_seq)] == 1:
            key_stream = (r.session_id, r.key, r.partition)
            counts["key_reorder"] += r.key_seq < key_highest.get(key_stream, -1)
            key_highest[key_stream] = max(key_highest.get(key_stream, -1), r.key_seq)

    counts["duplicate"] = sum(n - 1 for n in copies.values())
    counts["key_duplicate"] = sum(n - 1 for n in key_copies.values())
    counts["lost"] = sum(
        1
        for identity, outcome in outcome_of.items()
        if outcome == Outcome.ACK and identity not in copies
    )
    counts["gap"] = sum(_missing(seqs, excused[s]) for s, seqs in present.items())
    counts["key_gap"] = sum(_missing(seqs, key_excused[s]) for s, seqs in key_present.items())
    return dict(counts)
