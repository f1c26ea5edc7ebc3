"""Committed offsets and group metadata on disk: the reference broker's __consumer_offsets.

Kafka keeps both in the compacted __consumer_offsets topic: an offset commit is a record per
partition, a group's membership after each rebalance a record per group, a deletion a
tombstone; a coordinator that (re)starts replays the partition into its caches
(GroupMetadataManager). Here one record file (record_file.py) does the same for the single
broker:

    <data_dir>/groups/group-metadata.log

Each record is one request's worth of changes (UTF-8 JSON: a list of entries), so a commit of
many partitions lands whole or not at all. An entry is an offset (group, topic, partition,
offset, leader epoch, metadata, commit time), an offset tombstone (offset null), a group (its
generation, protocol, leader, members with their subscription and assignment, bytes in base64),
a group tombstone, a transactional offset (TxnOffsetCommit: pending under its producer id until
its transaction ends) or a transaction marker (the end of a producer's transaction in a group:
its pending offsets become committed offsets on commit and are dropped on abort, as Kafka's
control records in __consumer_offsets do).

Recovery replays the records, later entries winning, and cuts a torn or corrupt tail (a record
whose JSON is wrong counts as corrupt). Compaction rewrites the file with only the live entries
once it holds more than twice as many entries as are live, and at least COMPACT_MIN_ENTRIES.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from eoslab.refbroker.record_file import CorruptRecordError, RecordFile

FILE_NAME = "group-metadata.log"
COMPACT_MIN_ENTRIES = 10_000
NO_LEADER_EPOCH = -1


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    commit_timestamp_ms: int = -1
    expire_timestamp_ms: int | None = None


@dataclass(frozen=True)
class MemberRecord:
    """A member as GroupMetadataManager.groupMetadataValue stores it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupRecord:
    protocol_type: str | None
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    members: tuple[MemberRecord, ...]

    def encoded_size(self) -> int:
        return len(_dump([_entry(GroupChange("", self))]))


TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class OffsetChange:
    group_id: str
    partition: TopicPartition
    value: OffsetAndMetadata | None
    """None: a tombstone."""


@dataclass(frozen=True)
class GroupChange:
    group_id: str
    record: GroupRecord | None
    """None: a tombstone (the group's offsets, pending ones included, go with it)."""


@dataclass(frozen=True)
class TxnOffsetChange:
    """An offset committed inside producer `producer_id`'s transaction, pending until it ends."""

    group_id: str
    producer_id: int
    partition: TopicPartition
    value: OffsetAndMetadata


@dataclass(frozen=True)
class TxnMarkerChange:
    group_id: str
    producer_id: int
    commit: bool


Change = OffsetChange | GroupChange | TxnOffsetChange | TxnMarkerChange


class CommittedOffsetStore:
    """Offsets per group (committed, and pending per transactional producer) and the last stored
    metadata of every group, durable in one record file."""

    def __init__(self, directory: Path, *, sync: bool) -> None:
        self.directory = directory
        self.path = directory / FILE_NAME
        self._offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self._pending: dict[str, dict[int, dict[TopicPartition, OffsetAndMetadata]]] = {}
        self._groups: dict[str, GroupRecord] = {}
        self._entries_in_file = 0
        self._file = RecordFile(self.path, sync=sync, apply=self._replay)
        self.recovered_bytes_truncated = self._file.recovered_bytes_truncated

    # ---------------------------------------------------------------- reading

    def offsets(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return dict(self._offsets.get(group_id, {}))

    def offset(self, group_id: str, partition: TopicPartition) -> OffsetAndMetadata | None:
        return self._offsets.get(group_id, {}).get(partition)

    def pending_offsets(self, group_id: str) -> dict[int, dict[TopicPartition, OffsetAndMetadata]]:
        """Producer id -> the offsets its open transaction committed to the group."""
        return {pid: dict(o) for pid, o in self._pending.get(group_id, {}).items()}

    def has_pending_offset(self, group_id: str, partition: TopicPartition) -> bool:
        return any(partition in o for o in self._pending.get(group_id, {}).values())

    def groups(self) -> dict[str, GroupRecord]:
        """The last stored metadata of every group that has any."""
        return dict(self._groups)

    def group_ids(self) -> set[str]:
        """Every group with stored metadata or at least one committed or pending offset."""
        return (
            set(self._groups)
            | {g for g, offsets in self._offsets.items() if offsets}
            | set(self._pending)
        )

    @property
    def live_entries(self) -> int:
        return (
            len(self._groups)
            + sum(len(o) for o in self._offsets.values())
            + sum(len(o) for txns in self._pending.values() for o in txns.values())
        )

    # ---------------------------------------------------------------- writing

    def commit(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Store the offsets (durably, with `sync`) before they become visible."""
        self._append([OffsetChange(group_id, tp, o) for tp, o in offsets.items()])

    def commit_transactional(
        self, group_id: str, producer_id: int, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """Store offsets of an open transaction: visible only once `end_transaction` commits."""
        self._append([TxnOffsetChange(group_id, producer_id, tp, o) for tp, o in offsets.items()])

    def end_transaction(self, group_id: str, producer_id: int, commit: bool) -> int:
        """The transaction marker: the producer's pending offsets in the group are committed or
        dropped. Returns how many there were (no marker is written when there were none)."""
        pending = len(self._pending.get(group_id, {}).get(producer_id, {}))
        if pending:
            self._append([TxnMarkerChange(group_id, producer_id, commit)])
        return pending

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> int:
        """Tombstones for the partitions that have an offset; returns how many were removed."""
        known = self._offsets.get(group_id, {})
        doomed = [tp for tp in dict.fromkeys(partitions) if tp in known]
        self._append([OffsetChange(group_id, tp, None) for tp in doomed])
        return len(doomed)

    def delete_group(self, group_id: str) -> int:
        """Tombstones for the group and all its offsets; returns the offsets removed."""
        removed = self.delete_offsets(group_id, list(self._offsets.get(group_id, {})))
        if group_id in self._groups or group_id in self._pending:
            self._append([GroupChange(group_id, None)])
        return removed

    def store_group(self, group_id: str, record: GroupRecord) -> None:
        self._append([GroupChange(group_id, record)])

    def close(self) -> None:
        self._file.close()

    def _append(self, changes: list[Change]) -> None:
        if not changes:
            return
        self._file.append(_dump([_entry(change) for change in changes]))
        for change in changes:
            self._apply(change)
        self._entries_in_file += len(changes)
        if self._entries_in_file >= max(COMPACT_MIN_ENTRIES, 2 * self.live_entries):
            self.compact()

    def compact(self) -> None:
        """Rewrite the file with the live entries only, replacing it atomically."""
        changes: list[Change] = [GroupChange(g, r) for g, r in self._groups.items()]
        changes += [
            OffsetChange(group, tp, o)
            for group, offsets in self._offsets.items()
            for tp, o in offsets.items()
        ]
        changes += [
            TxnOffsetChange(group, pid, tp, o)
            for group, txns in self._pending.items()
            for pid, offsets in txns.items()
            for tp, o in offsets.items()
        ]
        entries = [_entry(change) for change in changes]
        self._file.rewrite([_dump(entries)] if entries else [])
        self._entries_in_file = len(entries)

    # ---------------------------------------------------------------- recovery

    def _replay(self, payload: bytes) -> None:
        changes = _load(payload)
        for change in changes:
            self._apply(change)
        self._entries_in_file += len(changes)

    def _apply(self, change: Change) -> None:
        match change:
            case OffsetChange(group_id, partition, None):
                offsets = self._offsets.get(group_id, {})
                offsets.pop(partition, None)
                if not offsets:
                    self._offsets.pop(group_id, None)
            case OffsetChange(group_id, partition, OffsetAndMetadata() as value):
                self._offsets.setdefault(group_id, {})[partition] = value
            case TxnOffsetChange(group_id, producer_id, partition, value):
                txns = self._pending.setdefault(group_id, {})
                txns.setdefault(producer_id, {})[partition] = value
            case TxnMarkerChange(group_id, producer_id, commit):
                txns = self._pending.get(group_id, {})
                pending = txns.pop(producer_id, {})
                if not txns:
                    self._pending.pop(group_id, None)
                if commit and pending:
                    self._offsets.setdefault(group_id, {}).update(pending)
            case GroupChange(group_id, None):
                self._groups.pop(group_id, None)
                self._pending.pop(group_id, None)
            case GroupChange(group_id, GroupRecord() as record):
                self._groups[group_id] = record


def _entry(change: Change) -> dict[str, Any]:
    match change:
        case OffsetChange(group_id, (topic, partition), offset):
            value = None if offset is None else asdict(offset)
            return {
                "type": "offset",
                "group": group_id,
                "topic": topic,
                "partition": partition,
                "value": value,
            }
        case TxnOffsetChange(group_id, producer_id, (topic, partition), offset):
            return {
                "type": "txn-offset",
                "group": group_id,
                "producer_id": producer_id,
                "topic": topic,
                "partition": partition,
                "value": asdict(offset),
            }
        case TxnMarkerChange(group_id, producer_id, commit):
            return {
                "type": "txn-marker",
                "group": group_id,
                "producer_id": producer_id,
                "value": commit,
            }
        case GroupChange(group_id, record):
            return {"type": "group", "group": group_id, "value": _group_value(record)}


def _group_value(record: GroupRecord | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {
        **asdict(record),
        "members": [
            {
                **asdict(m),
                "subscription": base64.b64encode(m.subscription).decode(),
                "assignment": base64.b64encode(m.assignment).decode(),
            }
            for m in record.members
        ],
    }


def _change(entry: dict[str, Any]) -> Change:
    value = entry["value"]
    match entry["type"]:
        case "offset":
            partition = (str(entry["topic"]), int(entry["partition"]))
            offset = None if value is None else OffsetAndMetadata(**value)
            return OffsetChange(str(entry["group"]), partition, offset)
        case "txn-offset":
            partition = (str(entry["topic"]), int(entry["partition"]))
            producer_id = int(entry["producer_id"])
            return TxnOffsetChange(
                str(entry["group"]), producer_id, partition, OffsetAndMetadata(**value)
            )
        case "txn-marker":
            return TxnMarkerChange(str(entry["group"]), int(entry["producer_id"]), bool(value))
    if entry["type"] != "group":
        raise CorruptRecordError(f"unknown entry type {entry['type']!r}")
    if value is None:
        return GroupChange(str(entry["group"]), None)
    members = tuple(
        MemberRecord(
            **{
                **m,
                "subscription": base64.b64decode(m["subscription"]),
                "assignment": base64.b64decode(m["assignment"]),
            }
        )
        for m in value["members"]
    )
    return GroupChange(str(entry["group"]), GroupRecord(**{**value, "members": members}))


def _dump(entries: list[dict[str, Any]]) -> bytes:
    return json.dumps(entries, separators=(",", ":"), ensure_ascii=False).encode()


def _load(payload: bytes) -> list[Change]:
    """The changes of one record; anything unexpected makes the record (and the tail) corrupt."""
    try:
        entries = json.loads(payload)
        if not isinstance(entries, list):
            raise CorruptRecordError("a record holds a list of entries")
        return [_change(entry) for entry in entries]
    except (ValueError, KeyError, TypeError, AttributeError) as bad:
        raise CorruptRecordError(str(bad)) from None
