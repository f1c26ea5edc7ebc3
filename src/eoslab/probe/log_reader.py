"""Read a partition back with Fetch, to see what a flow really left in the log."""

from __future__ import annotations

from dataclasses import dataclass

from eoslab.kafka_api import error_name
from eoslab.message import Message, decode
from eoslab.probe.batches import read_batches
from eoslab.probe.client import KafkaProtocolClient
from eoslab.probe.requests import fetch_request
from eoslab.probe.transcript import NONE

MAX_FETCHES = 1000


class LogReadError(RuntimeError):
    """The partition could not be read to its end."""


@dataclass(frozen=True)
class LoggedRecord:
    offset: int
    key: bytes | None
    value: bytes | None

    def message(self) -> Message:
        """The workload (v1) message it carries; MessageFormatError if it is none."""
        return decode(self.key, self.value)


def read_partition(
    client: KafkaProtocolClient, topic: str, partition: int = 0, start: int = 0
) -> list[LoggedRecord]:
    """Every record from ``start`` to the high watermark, in offset order (the client must be
    connected to the partition's leader)."""
    records: list[LoggedRecord] = []
    offset = start
    for _ in range(MAX_FETCHES):
        response = client.request(fetch_request(topic, partition, offset))
        data = response.responses[0].partitions[0]
        if error_name(data.error_code) != NONE:
            raise LogReadError(
                f"fetch {topic}[{partition}] at {offset}: {error_name(data.error_code)}"
            )
        for batch in read_batches(data.records):
            for record in batch.records:
                if record.offset >= offset:
                    records.append(LoggedRecord(int(record.offset), record.key, record.value))
            offset = max(offset, batch.base_offset + batch.last_offset_delta + 1)
        if offset >= data.high_watermark:
            return records
    raise LogReadError(f"{topic}[{partition}] not read to its end in {MAX_FETCHES} fetches")
