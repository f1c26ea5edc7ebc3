"""CommittedOffsetStore on disk: what a reopen recovers, after torn and corrupt tails too."""

from __future__ import annotations

from pathlib import Path

import pytest

from eoslab.refbroker import record_file
from eoslab.refbroker.groups import committed_offsets
from eoslab.refbroker.groups.committed_offsets import (
    CommittedOffsetStore,
    GroupRecord,
    MemberRecord,
    OffsetAndMetadata,
)

GROUP = GroupRecord(
    protocol_type="consumer",
    generation_id=4,
    protocol_name="range",
    leader_id="m-1",
    members=(
        MemberRecord("m-1", None, "c", "/127.0.0.1", 30_000, 10_000, b"\x00sub\xff", b"\x01asg"),
        MemberRecord("m-2", "i-2", "c", "/127.0.0.1", 30_000, 10_000, b"", b""),
    ),
)


def reopened(directory: Path) -> CommittedOffsetStore:
    return CommittedOffsetStore(directory, sync=True)


def test_commits_groups_and_tombstones_survive_a_reopen(tmp_path: Path) -> None:
    store = reopened(tmp_path)
    store.commit(
        "g", {("t", 0): OffsetAndMetadata(5, 1, "meta", 123), ("t", 1): OffsetAndMetadata(7)}
    )
    store.commit("g", {("t", 0): OffsetAndMetadata(6, 1, "later", 124)})
    store.store_group("g", GROUP)
    store.commit("h", {("u", 0): OffsetAndMetadata(1)})
    assert store.delete_offsets("g", [("t", 1), ("t", 9)]) == 1
    store.store_group("gone", GROUP)
    store.delete_group("gone")
    store.close()

    again = reopened(tmp_path)
    assert again.recovered_bytes_truncated == 0
    assert again.offsets("g") == {("t", 0): OffsetAndMetadata(6, 1, "later", 124)}
    assert again.groups() == {"g": GROUP}
    assert again.group_ids() == {"g", "h"}
    again.close()


def test_a_torn_last_record_is_cut_and_the_rest_kept(tmp_path: Path) -> None:
    store = reopened(tmp_path)
    store.commit("g", {("t", 0): OffsetAndMetadata(1)})
    store.commit("g", {("t", 0): OffsetAndMetadata(2)})
    store.close()
    path = tmp_path / committed_offsets.FILE_NAME
    whole = path.read_bytes()
    path.write_bytes(whole[:-3])  # kill -9 in the middle of the second append

    again = reopened(tmp_path)
    assert again.recovered_bytes_truncated > 0
    assert again.offset("g", ("t", 0)) == OffsetAndMetadata(1)
    again.commit("g", {("t", 0): OffsetAndMetadata(3)})  # appends after the cut
    again.close()
    assert reopened(tmp_path).offset("g", ("t", 0)) == OffsetAndMetadata(3)


@pytest.mark.parametrize(
    "damage",
    [
        lambda data, first: data[:first] + b"\xff\xff\xff\xff" + data[first + 4 :],  # length
        lambda data, first: data[: first + 9] + b"X" + data[first + 10 :],  # payload byte
        lambda data, first: data[:first] + b"\x00" * 3,  # a header cut short
    ],
)
def test_a_corrupt_record_ends_the_log_there(tmp_path: Path, damage: object) -> None:
    store = reopened(tmp_path)
    store.commit("g", {("t", 0): OffsetAndMetadata(1)})
    first_end = (tmp_path / committed_offsets.FILE_NAME).stat().st_size
    store.commit("g", {("t", 0): OffsetAndMetadata(2)})
    store.close()
    path = tmp_path / committed_offsets.FILE_NAME
    path.write_bytes(damage(path.read_bytes(), first_end))  # type: ignore[operator]

    again = reopened(tmp_path)
    assert again.offset("g", ("t", 0)) == OffsetAndMetadata(1)
    assert path.stat().st_size == first_end


def test_a_valid_crc_around_garbage_json_is_corruption_too(tmp_path: Path) -> None:
    from crc32c import crc32c

    payload = b'[{"type": "offset", "group": 1}]'
    header = record_file.RECORD_HEADER.pack(len(payload), crc32c(payload))
    (tmp_path / committed_offsets.FILE_NAME).write_bytes(header + payload)
    store = reopened(tmp_path)
    assert store.group_ids() == set()
    assert store.recovered_bytes_truncated == len(header + payload)


def test_compaction_keeps_only_the_live_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(committed_offsets, "COMPACT_MIN_ENTRIES", 10)
    store = reopened(tmp_path)
    store.store_group("g", GROUP)
    for offset in range(100):
        store.commit("g", {("t", offset % 2): OffsetAndMetadata(offset)})
    size = (tmp_path / committed_offsets.FILE_NAME).stat().st_size
    store.close()
    assert size < 3_000  # 101 records would take far more
    again = reopened(tmp_path)
    assert again.offsets("g") == {("t", 0): OffsetAndMetadata(98), ("t", 1): OffsetAndMetadata(99)}
    assert again.groups() == {"g": GROUP}


def test_transactional_offsets_wait_for_their_marker_across_reopens(tmp_path: Path) -> None:
    store = reopened(tmp_path)
    store.commit("g", {("t", 0): OffsetAndMetadata(1)})
    store.commit_transactional(
        "g", 7, {("t", 0): OffsetAndMetadata(5), ("t", 1): OffsetAndMetadata(6)}
    )
    store.commit_transactional("g", 8, {("t", 1): OffsetAndMetadata(9)})
    store.close()
    again = reopened(tmp_path)
    assert again.offsets("g") == {("t", 0): OffsetAndMetadata(1)}  # pending ones are not visible
    assert again.has_pending_offset("g", ("t", 1))
    assert again.end_transaction("g", 7, commit=True) == 2
    assert again.end_transaction("g", 8, commit=False) == 1
    assert again.end_transaction("g", 8, commit=True) == 0  # nothing pending any more
    again.close()
    final = reopened(tmp_path)
    assert final.offsets("g") == {("t", 0): OffsetAndMetadata(5), ("t", 1): OffsetAndMetadata(6)}
    assert final.pending_offsets("g") == {}


def test_compaction_keeps_pending_transactional_offsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(committed_offsets, "COMPACT_MIN_ENTRIES", 10)
    store = reopened(tmp_path)
    store.commit_transactional("g", 7, {("t", 0): OffsetAndMetadata(3)})
    for offset in range(30):
        store.commit("g", {("t", 1): OffsetAndMetadata(offset)})
    store.close()
    again = reopened(tmp_path)
    assert again.pending_offsets("g") == {7: {("t", 0): OffsetAndMetadata(3)}}
    again.end_transaction("g", 7, commit=True)
    assert again.offsets("g") == {("t", 0): OffsetAndMetadata(3), ("t", 1): OffsetAndMetadata(29)}
