"""Committed offsets and group metadata on disk: the reference broker's __consumer_offsets.

Kafka keeps both in the compacted __consumer_offsets topic: an offset commit is a record per
partition, a group's membership after each rebalance a record per group, a deletion a
tombstone; a coordinator that (re)starts replays the partition into its caches
(GroupMetadataManager). Here one append-only file does the same for the single broker:

    <data_dir>/groups/group-metadata.log

Each appended record is one request's worth of changes, so a commit of many partitions lands
whole or not at all:

    length uint32 | CRC-32C uint32 of the payload | payload (UTF-8 JSON: a list of entries)

An entry is an offset (group, topic, partition, offset, leader epoch, metadata, commit time),
an offset tombstone (offset null), a group (its generation, protocol, leader, members with
their subscription and assignment, bytes in base64) or a group tombstone. With `sync` (the
broker's `--fsync every-batch`) every append is fdatasync'ed before it is acknowledged, so a
commit that was answered survives kill -9 and power loss; without it, the page cache keeps
it across kill -9 only.

Recovery reads records until the first one whose length, CRC or JSON is wrong, cuts the file
there (a torn tail from a crash mid-write) and replays the rest, later entries winning.
Compaction rewrites the file with only the live entries (atomically: temporary file, fsync,
rename) once it holds more than twice as many entries as are live, and at least
COMPACT_MIN_ENTRIES.
"""

from __future__ import annotations

import base64
import json
import os
import struct
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from crc32c import crc32c

from eoslab.refbroker.durable_files import fsync_dir, write_atomically

FILE_NAME = "group-metadata.log"
RECORD_HEADER = struct.Struct(">II")  # payload length, CRC-32C of the payload
MAX_RECORD_BYTES = 64 * 1024 * 1024
"""A length above this is a torn or corrupt header, never a record we wrote."""
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


Change = OffsetChange | GroupChange


class CorruptRecordError(ValueError):
    pass


class CommittedOffsetStore:
    """Offsets per group and the last stored metadata of every group, durable in one file."""

    def __init__(self, directory: Path, *, sync: bool) -> None:
        self.directory = directory
        self.path = directory / FILE_NAME
        self._sync = sync
        directory.mkdir(parents=True, exist_ok=True)
        self._offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self._groups: dict[str, GroupRecord] = {}
        self._entries_in_file = 0
        self.recovered_bytes_truncated = self._recover()
        # an unbuffered file object, so an abandoned store (crash simulation) closes on GC
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115
        fsync_dir(directory)

    # ---------------------------------------------------------------- reading

    def offsets(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return dict(self._offsets.get(group_id, {}))

    def offset(self, group_id: str, partition: TopicPartition) -> OffsetAndMetadata | None:
        return self._offsets.get(group_id, {}).get(partition)

    def groups(self) -> dict[str, GroupRecord]:
        """The last stored metadata of every group that has any."""
        return dict(self._groups)

    def group_ids(self) -> set[str]:
        """Every group with stored metadata or at least one committed offset."""
        return set(self._groups) | {g for g, offsets in self._offsets.items() if offsets}

    @property
    def live_entries(self) -> int:
        return len(self._groups) + sum(len(o) for o in self._offsets.values())

    # ---------------------------------------------------------------- writing

    def commit(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Store the offsets (durably, with `sync`) before they become visible."""
        self._append([OffsetChange(group_id, tp, o) for tp, o in offsets.items()])

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> int:
        """Tombstones for the partitions that have an offset; returns how many were removed."""
        known = self._offsets.get(group_id, {})
        doomed = [tp for tp in dict.fromkeys(partitions) if tp in known]
        self._append([OffsetChange(group_id, tp, None) for tp in doomed])
        return len(doomed)

    def delete_group(self, group_id: str) -> int:
        """Tombstones for the group and all its offsets; returns the offsets removed."""
        removed = self.delete_offsets(group_id, list(self._offsets.get(group_id, {})))
        if group_id in self._groups:
            self._append([GroupChange(group_id, None)])
        return removed

    def store_group(self, group_id: str, record: GroupRecord) -> None:
        self._append([GroupChange(group_id, record)])

    def close(self) -> None:
        self._file.close()

    def _append(self, changes: list[Change]) -> None:
        if not changes:
            return
        payload = _dump([_entry(change) for change in changes])
        data = RECORD_HEADER.pack(len(payload), crc32c(payload)) + payload
        position = os.fstat(self._file.fileno()).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._file.fileno(), view) :]
            if self._sync:
                os.fdatasync(self._file.fileno())
        except OSError:
            os.ftruncate(self._file.fileno(), position)
            raise
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
        entries = [_entry(change) for change in changes]
        payload = _dump(entries)
        data = RECORD_HEADER.pack(len(payload), crc32c(payload)) + payload if entries else b""
        write_atomically(self.path, data)
        self._file.close()
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115
        self._entries_in_file = len(entries)

    # ---------------------------------------------------------------- recovery

    def _recover(self) -> int:
        if not self.path.exists():
            return 0
        data = self.path.read_bytes()
        position = 0
        while position + RECORD_HEADER.size <= len(data):
            length, crc = RECORD_HEADER.unpack_from(data, position)
            start = position + RECORD_HEADER.size
            payload = data[start : start + length]
            if length > MAX_RECORD_BYTES or len(payload) < length or crc32c(payload) != crc:
                break
            try:
                changes = _load(payload)
            except CorruptRecordError:
                break
            for change in changes:
                self._apply(change)
            self._entries_in_file += len(changes)
            position = start + length
        truncated = len(data) - position
        if truncated:
            with self.path.open("r+b") as torn:
                torn.truncate(position)
                os.fsync(torn.fileno())
        return truncated

    def _apply(self, change: Change) -> None:
        if isinstance(change, OffsetChange):
            if change.value is not None:
                self._offsets.setdefault(change.group_id, {})[change.partition] = change.value
                return
            offsets = self._offsets.get(change.group_id, {})
            offsets.pop(change.partition, None)
            if not offsets:
                self._offsets.pop(change.group_id, None)
        elif change.record is not None:
            self._groups[change.group_id] = change.record
        else:
            self._groups.pop(change.group_id, None)


def _entry(change: Change) -> dict[str, Any]:
    if isinstance(change, OffsetChange):
        topic, partition = change.partition
        value = None if change.value is None else asdict(change.value)
        return {
            "type": "offset",
            "group": change.group_id,
            "topic": topic,
            "partition": partition,
            "value": value,
        }
    record = change.record
    value = None
    if record is not None:
        value = {
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
    return {"type": "group", "group": change.group_id, "value": value}


def _change(entry: dict[str, Any]) -> Change:
    value = entry["value"]
    if entry["type"] == "offset":
        partition = (str(entry["topic"]), int(entry["partition"]))
        offset = None if value is None else OffsetAndMetadata(**value)
        return OffsetChange(str(entry["group"]), partition, offset)
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
