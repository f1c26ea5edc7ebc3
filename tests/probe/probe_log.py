"""What a flow run left in its partition, and its answers in the forms the tests compare."""

from __future__ import annotations

from eoslab.admin import find_leader
from eoslab.message import Message
from eoslab.probe.client import KafkaProtocolClient
from eoslab.probe.log_reader import read_partition
from eoslab.probe.runner import FlowRun


def messages_in(bootstrap: str, topic: str, partition: int = 0) -> list[tuple[int, Message]]:
    """(offset, message) of every record of the partition, read from its leader."""
    leader = find_leader(bootstrap, topic, partition)
    with KafkaProtocolClient(leader.host, leader.port) as client:
        records = read_partition(client, topic, partition)
    return [(r.offset, r.message()) for r in records]


def logged(run: FlowRun, bootstrap: str) -> list[tuple[str, int]]:
    """The run's records in offset order, each as its group tag and index (A/0 .. A/6 ...)."""
    messages = [m for _, m in messages_in(bootstrap, run.topic, run.partition)]
    assert {m.session_id for m in messages} <= {run.session_id}
    return [(m.key, m.key_seq) for m in messages]


def written(run: FlowRun, tags: str | list[str]) -> list[tuple[str, int]]:
    """What the groups ``tags`` look like in the log when each is written once, in that order."""
    return [(tag, index) for tag in tags for index in range(run.flow.group(tag).count)]


def errors(run: FlowRun) -> list[str | None]:
    return [e.error for e in run.produced()]


def relative_offsets(run: FlowRun) -> list[int | None]:
    """Each Produce answer's base offset relative to the first one (None for a refusal)."""
    first = run.produced()[0].base_offset
    assert first is not None
    return [
        None if e.error != "NONE" or e.base_offset is None else e.base_offset - first
        for e in run.produced()
    ]
