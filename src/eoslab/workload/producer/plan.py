"""Which record a producer session sends next: partition, key and both sequences, all seeded.

Keys are spread over the partitions once per run (a seeded, balanced assignment), so every
record of a key lands in one partition and per-key order is something Kafka promises. The
choice of key per record is seeded per (run seed, producer, session index): the same
scenario and seed replay the same stream.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PlannedRecord:
    partition: int
    seq: int
    key: str
    key_seq: int


class KeySpace:
    """``size`` keys ``k0..k<size-1>``, each bound to one partition."""

    def __init__(self, size: int, partitions: int, seed: int) -> None:
        if size < 1 or partitions < 1:
            raise ValueError("a key space needs at least one key and one partition")
        order = list(range(size))
        random.Random(f"keyspace:{seed}").shuffle(order)
        self._partition_of = [0] * size
        for position, key_index in enumerate(order):
            self._partition_of[key_index] = position % partitions
        self.size = size

    @staticmethod
    def key(index: int) -> str:
        return f"k{index}"

    def partition_of(self, index: int) -> int:
        return self._partition_of[index]


class RecordStream:
    """The records of one producer session, in send order."""

    def __init__(self, keys: KeySpace, seed: int, producer: int, session_index: int) -> None:
        self._keys = keys
        self._rng = random.Random(f"records:{seed}:{producer}:{session_index}")
        self._next_seq: dict[int, int] = {}
        self._next_key_seq: dict[int, int] = {}

    def next(self) -> PlannedRecord:
        index = self._rng.randrange(self._keys.size)
        partition = self._keys.partition_of(index)
        seq = self._next_seq.get(partition, 0)
        key_seq = self._next_key_seq.get(index, 0)
        self._next_seq[partition] = seq + 1
        self._next_key_seq[index] = key_seq + 1
        return PlannedRecord(partition, seq, self._keys.key(index), key_seq)
