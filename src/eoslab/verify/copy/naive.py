"""The naive checker's copy anomalies (consume-transform-produce) in plain Python: the same
definitions as :mod:`eoslab.verify.copy.anomalies`, implemented a second time and
independently, from the producers' transaction ledger, the read_committed reader's reads of the
input and the output topic's copies (read read_committed with confluent-kafka, or given)."""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from eoslab.message import MessageFormatError, decode, decode_copy
from eoslab.rundir import COPY_ANOMALIES, TxnOutcome

Location = tuple[str, int, int, int, int | None, int | None]
"""(session_id, partition, seq, offset, out_partition, out_offset): the input, and where its
copy is (None, None for an input without one)."""


@dataclass(frozen=True)
class CopyRecord:
    """A copy of one of the run's messages: where it is, and the input it names."""

    out_partition: int
    out_offset: int
    session_id: str
    partition: int
    seq: int
    offset: int


def parse_copy(
    out_partition: int, out_offset: int, value: bytes | None, run_id: str
) -> CopyRecord | None:
    """The copy at (out_partition, out_offset), None when it is no copy of the run's messages."""
    try:
        copy = decode_copy(value)
        message = decode(None, copy.value)
    except MessageFormatError:
        return None
    if message.run_id != run_id or message.partition != copy.in_partition:
        return None
    return CopyRecord(
        out_partition, out_offset, message.session_id, message.partition, message.seq,
        copy.in_offset,
    )  # fmt: skip


def read_copies(
    bootstrap: str, topic: str, partitions: int, run_id: str, timeout_s: float = 120.0
) -> list[CopyRecord]:
    """The copies in ``topic`` as a read_committed consumer reads it, to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"eoslab-naive-copy-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    found: list[CopyRecord] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        left = set(range(partitions))
        deadline = time.monotonic() + timeout_s
        while left:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: partitions {sorted(left)} not read in {timeout_s} s")
            for message in consumer.consume(1000, timeout=0.5):
                error, where = message.error(), message.partition()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    left.discard(where)
                elif error is not None:
                    raise KafkaException(error)
                elif where is not None and (offset := message.offset()) is not None:
                    copy = parse_copy(where, offset, message.value(), run_id)
                    if copy is not None:
                        found.append(copy)
    finally:
        consumer.close()
    return found


def copy_anomalies(
    transactions: Iterable[Mapping[str, Any]],
    visible: Iterable[Mapping[str, Any]],
    copies: Iterable[CopyRecord],
    committed: Mapping[int, int],
) -> dict[str, list[Location]]:
    """Every copy anomaly, by name, as the sorted locations of its rows."""
    aborted = {
        (transaction["session_id"], record["partition"], record["seq"])
        for transaction in transactions
        if transaction["outcome"] == TxnOutcome.ABORTED
        for record in transaction["records"]
    }
    of_input: dict[tuple[str, int, int, int], list[CopyRecord]] = defaultdict(list)
    for copy in sorted(copies, key=lambda c: (c.out_partition, c.out_offset)):
        of_input[(copy.session_id, copy.partition, copy.seq, copy.offset)].append(copy)
    found: dict[str, list[Location]] = {name: [] for name in COPY_ANOMALIES}
    for read in visible:
        if read["session_id"] is None:
            continue
        place = (read["session_id"], read["partition"], read["seq"], read["offset"])
        if not of_input.get(place):
            found["lost_copy"].append((*place, None, None))
            if place[3] < committed.get(place[1], -1):
                found["committed_uncopied"].append((*place, None, None))
    for place, made in of_input.items():
        for number, copy in enumerate(made):
            location = (*place, copy.out_partition, copy.out_offset)
            if number > 0:
                found["duplicate_copy"].append(location)
            if place[:3] in aborted:
                found["copy_of_aborted"].append(location)
    return {name: sorted(rows, key=repr) for name, rows in found.items()}


def count_copy_anomalies(
    transactions: Iterable[Mapping[str, Any]],
    visible: Iterable[Mapping[str, Any]],
    copies: Iterable[CopyRecord],
    committed: Mapping[int, int],
) -> dict[str, int]:
    """Every copy anomaly's count."""
    found = copy_anomalies(transactions, visible, copies, committed)
    return {name: len(rows) for name, rows in found.items()}
