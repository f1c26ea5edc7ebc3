"""librdkafka (confluent-kafka) clients for the end-to-end tests: eoslab.smoke's producer and
consumer, with the settings and the strict check these tests use.

Every value is b"<partition>:<sequence>": the test picks the partition itself, so per
partition the sequences must come back complete, in order and exactly once.
"""

from __future__ import annotations

# Small batches, a bounded window: many Produce requests, so faults land mid-stream.
BATCHING = {"batch.num.messages": 50}
MAX_UNACKED = 1000


def assert_exactly_once_in_order(
    records: dict[int, list[tuple[int, int]]],
    acked: dict[tuple[int, int], int],
    sent_per_partition: int,
) -> None:
    """Per partition: sequences 0..n-1, each once, in offset order; every ack points at its record."""
    for partition, rows in records.items():
        sequences = [sequence for _, sequence in rows]
        assert sequences == list(range(sent_per_partition)), (
            f"partition {partition}: duplicates/gaps/reorders, "
            f"{len(sequences)} records, {len(set(sequences))} distinct"
        )
        offsets = {sequence: offset for offset, sequence in rows}
        for (acked_partition, sequence), offset in acked.items():
            if acked_partition == partition:
                assert offsets[sequence] == offset, (
                    f"ack of {partition}:{sequence} points elsewhere"
                )
