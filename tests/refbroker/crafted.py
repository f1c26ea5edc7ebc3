"""Crafted requests for the protocol-level tests (probe client + kio entities)."""

from __future__ import annotations

from collections.abc import Sequence

from eoslab.probe.batches import record_batch
from eoslab.probe.client import KafkaProtocolClient
from eoslab.probe.log_reader import read_partition
from eoslab.probe.requests import (
    TIMEOUT,
    fetch_request,
    init_producer_id_request,
    produce_request,
)

__all__ = [
    "TIMEOUT",
    "batch_of",
    "errors_of",
    "fetch_request",
    "fetch_values",
    "init_producer_id",
    "logged_records",
    "produce_request",
]


def init_producer_id(client: KafkaProtocolClient) -> tuple[int, int]:
    response = client.request(init_producer_id_request())
    return response.producer_id, response.producer_epoch


def batch_of(
    pid: int, epoch: int, first_seq: int, last_seq: int, tag: str, *, first_value: int | None = None
) -> bytes:
    """Records `tag/first_seq` .. `tag/last_seq` (the seeds' `A/114~120`); a resend after an
    epoch bump keeps its values but not its sequences: pass the original `first_value`."""
    start = first_seq if first_value is None else first_value
    values = [f"{tag}/{n}".encode() for n in range(start, start + last_seq - first_seq + 1)]
    return record_batch(pid, epoch, first_seq, values)


def fetch_values(
    client: KafkaProtocolClient, topic: str, partition: int = 0, start: int = 0
) -> list[bytes | None]:
    """Every record value from `start` to the end, in offset order."""
    return [record.value for record in read_partition(client, topic, partition, start)]


def logged_records(client: KafkaProtocolClient, topic: str) -> list[tuple[str, int]]:
    """A probe flow's records in offset order, as (batch tag, index in the batch)."""
    messages = [record.message() for record in read_partition(client, topic)]
    return [(message.key, message.key_seq) for message in messages]


def errors_of(responses: Sequence[object]) -> list[str]:
    return [r.responses[0].partition_responses[0].error_code.name.upper() for r in responses]  # type: ignore[attr-defined]
