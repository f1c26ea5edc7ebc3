"""The group APIs on the wire, at the old and new versions clients pick (crafted requests)."""

from __future__ import annotations

import dataclasses
import datetime

from kio.schema.delete_groups.v2 import DeleteGroupsRequest
from kio.schema.describe_groups.v0 import DescribeGroupsRequest as DescribeGroupsRequestV0
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v0 import FindCoordinatorRequest as FindCoordinatorRequestV0
from kio.schema.find_coordinator.v6 import FindCoordinatorRequest as FindCoordinatorRequestV6
from kio.schema.join_group.v0 import JoinGroupRequest as JoinGroupRequestV0
from kio.schema.join_group.v0.request import JoinGroupRequestProtocol as ProtocolV0
from kio.schema.leave_group.v0 import LeaveGroupRequest as LeaveGroupRequestV0
from kio.schema.list_groups.v5 import ListGroupsRequest
from kio.schema.offset_commit.v2 import OffsetCommitRequest as OffsetCommitRequestV2
from kio.schema.offset_commit.v2.request import (
    OffsetCommitRequestPartition as PartitionV2,
)
from kio.schema.offset_commit.v2.request import OffsetCommitRequestTopic as TopicV2
from kio.schema.offset_delete.v0 import OffsetDeleteRequest
from kio.schema.offset_delete.v0.request import (
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kio.schema.offset_fetch.v1 import OffsetFetchRequest as OffsetFetchRequestV1
from kio.schema.offset_fetch.v1.request import OffsetFetchRequestTopic
from kio.schema.offset_fetch.v7 import OffsetFetchRequest as OffsetFetchRequestV7
from kio.schema.offset_fetch.v8.request import OffsetFetchRequest, OffsetFetchRequestGroup
from kio.schema.sync_group.v5.request import SyncGroupRequest
from refbroker_process import RunningBroker

from eoslab.probe.client import KafkaProtocolClient
from eoslab.probe.requests import (
    consumer_subscription,
    describe_groups_request,
    join_group_request,
    offset_commit_request,
    offset_fetch_request,
    sync_group_request,
)

E = ErrorCode
SECOND = datetime.timedelta(seconds=10)


def stable_member(client: KafkaProtocolClient, group: str) -> tuple[str, int]:
    """A single member through MEMBER_ID_REQUIRED, JoinGroup and SyncGroup: (id, generation)."""
    required = client.request(join_group_request(group, "", "t"))
    assert required.error_code is E.member_id_required
    joined = client.request(join_group_request(group, required.member_id, "t"))
    assert (joined.error_code, joined.leader) == (E.none, joined.member_id)
    synced = client.request(
        sync_group_request(group, joined.generation_id, joined.member_id, {joined.member_id: b"a"})
    )
    assert (synced.error_code, synced.assignment) == (E.none, b"a")
    return joined.member_id, joined.generation_id


def test_find_coordinator_names_this_broker_at_every_version(
    group_broker: RunningBroker, group_client: KafkaProtocolClient
) -> None:
    old = group_client.request(FindCoordinatorRequestV0(key="g"))
    assert (old.error_code, old.node_id, old.port) == (E.none, 1, group_broker.port)
    batched = group_client.request(
        FindCoordinatorRequestV6(key_type=0, coordinator_keys=("a", "b"))
    ).coordinators
    assert [(c.key, c.error_code, c.node_id) for c in batched] == [
        ("a", E.none, 1),
        ("b", E.none, 1),
    ]
    kinds = {
        kind: group_client.request(FindCoordinatorRequestV6(key_type=kind, coordinator_keys=("k",)))
        .coordinators[0]
        .error_code
        for kind in (1, 2, 9)
    }
    assert kinds == {1: E.none, 2: E.coordinator_not_available, 9: E.invalid_request}


def test_join_group_v0_needs_no_member_id_and_answers_at_once(
    group_client: KafkaProtocolClient,
) -> None:
    request = JoinGroupRequestV0(
        group_id="old",
        session_timeout=SECOND,
        member_id="",
        protocol_type="consumer",
        protocols=(ProtocolV0(name="range", metadata=consumer_subscription("t")),),
    )
    joined = group_client.request(request)
    assert (joined.error_code, joined.generation_id, joined.protocol_name) == (E.none, 1, "range")
    refused = group_client.request(
        dataclasses.replace(request, session_timeout=datetime.timedelta(0))
    )
    assert (refused.error_code, refused.protocol_name) == (E.invalid_session_timeout, "")
    left = group_client.request(LeaveGroupRequestV0(group_id="old", member_id="ghost"))
    assert left.error_code is E.unknown_member_id  # v0: the member's error is the response's


def test_sync_group_v5_requires_protocol_type_and_name(group_client: KafkaProtocolClient) -> None:
    member, generation = stable_member(group_client, "v5")
    bare = SyncGroupRequest(
        group_id="v5", generation_id=generation, member_id=member, assignments=()
    )
    assert group_client.request(bare).error_code is E.inconsistent_group_protocol


def test_commit_v2_and_fetch_v1_v7_v8(group_client: KafkaProtocolClient) -> None:
    partitions = (
        PartitionV2(partition_index=0, committed_offset=11, committed_metadata="m"),
        PartitionV2(partition_index=7, committed_offset=1, committed_metadata=None),
    )
    commit = OffsetCommitRequestV2(
        group_id="simple",
        generation_id_or_member_epoch=-1,
        member_id="",
        retention_time=datetime.timedelta(milliseconds=-1),
        topics=(
            TopicV2(name="t", partitions=partitions),
            TopicV2(name="nope", partitions=partitions[:1]),
        ),
    )
    answers = group_client.request(commit).topics
    assert [
        (t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in answers
    ] == [
        ("t", [(0, E.none), (7, E.unknown_topic_or_partition)]),
        ("nope", [(0, E.unknown_topic_or_partition)]),
    ]
    v1 = group_client.request(
        OffsetFetchRequestV1(
            group_id="simple", topics=(OffsetFetchRequestTopic(name="t", partition_indexes=(0, 1)),)
        )
    )
    assert [(p.committed_offset, p.metadata) for p in v1.topics[0].partitions] == [
        (11, "m"),
        (-1, ""),
    ]
    every = group_client.request(
        OffsetFetchRequestV7(group_id="simple", topics=None, require_stable=True)
    )
    assert (every.error_code, [p.committed_offset for p in every.topics[0].partitions]) == (
        E.none,
        [11],
    )
    two = group_client.request(
        OffsetFetchRequest(
            groups=(
                OffsetFetchRequestGroup(group_id="simple", topics=None),
                OffsetFetchRequestGroup(group_id="", topics=None),
            )
        )
    )
    assert [(g.group_id, g.error_code, len(g.topics)) for g in two.groups] == [
        ("simple", E.none, 1),
        ("", E.none, 0),
    ]


def test_describe_list_and_delete(group_client: KafkaProtocolClient) -> None:
    member, generation = stable_member(group_client, "described")
    group_client.request(
        offset_commit_request(
            "described", generation=generation, member_id=member, topic="t", partition=0, offset=4
        )
    )
    (group, unknown) = group_client.request(describe_groups_request("described", "unknown")).groups
    assert (group.group_state, group.protocol_type, group.protocol_data) == (
        "Stable",
        "consumer",
        "range",
    )
    (described,) = group.members
    assert (described.client_host, described.member_assignment) == ("/127.0.0.1", b"a")
    assert described.member_metadata == consumer_subscription("t")
    assert group.authorized_operations == -(2**31)
    assert (unknown.error_code, unknown.group_state, unknown.members) == (E.none, "Dead", ())
    old = group_client.request(DescribeGroupsRequestV0(groups=("described",))).groups[0]
    assert old.members[0].member_id == member

    listed = group_client.request(ListGroupsRequest(states_filter=("stable",), types_filter=()))
    assert [(g.group_id, g.group_state, g.group_type) for g in listed.groups] == [
        ("described", "Stable", "classic")
    ]
    consumer_type = group_client.request(
        ListGroupsRequest(states_filter=(), types_filter=("consumer",))
    )
    assert consumer_type.groups == ()

    deleting = OffsetDeleteRequest(
        group_id="described",
        topics=(
            OffsetDeleteRequestTopic(
                name="t", partitions=(OffsetDeleteRequestPartition(partition_index=0),)
            ),
        ),
    )
    refused = group_client.request(deleting)
    assert refused.topics[0].partitions[0].error_code is E.group_subscribed_to_topic
    results = group_client.request(DeleteGroupsRequest(groups_names=("described", "never")))
    assert [(r.group_id, r.error_code) for r in results.results] == [
        ("described", E.non_empty_group),
        ("never", E.group_id_not_found),
    ]
    assert (
        group_client.request(offset_fetch_request("described", "t", (0,)))
        .groups[0]
        .topics[0]
        .partitions[0]
        .committed_offset
        == 4
    )
