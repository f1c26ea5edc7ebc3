"""Hostile input to the group coordinator: garbage and huge member metadata, garbage
assignments, unknown groups, wrong generations and odd group ids get Kafka's error codes; the
broker never stops, and other groups keep working meanwhile."""

from __future__ import annotations

import dataclasses
import datetime

from kio.schema.errors import ErrorCode
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from refbroker_process import RunningBroker
from test_hostile_input import still_serving

from eoslab.probe.client import KafkaProtocolClient
from eoslab.probe.requests import (
    describe_groups_request,
    heartbeat_request,
    join_group_request,
    leave_group_request,
    offset_commit_request,
    sync_group_request,
)

E = ErrorCode
HUGE = 2 * 1024 * 1024  # twice message.max.bytes: the group's record cannot be stored


def join(
    client: KafkaProtocolClient, group: str, metadata: bytes | None = None
) -> tuple[str, int, ErrorCode]:
    """JoinGroup through MEMBER_ID_REQUIRED: (member id, generation, error)."""
    member = client.request(join_group_request(group, "", "t", metadata=metadata)).member_id
    joined = client.request(join_group_request(group, member, "t", metadata=metadata))
    return member, joined.generation_id, joined.error_code


def sync(
    client: KafkaProtocolClient, group: str, member: str, generation: int, data: bytes
) -> object:
    return client.request(sync_group_request(group, generation, member, {member: data}))


def test_garbage_member_metadata_and_assignment_are_opaque_to_the_coordinator(
    group_client: KafkaProtocolClient,
) -> None:
    member, generation, error = join(group_client, "garbage", metadata=b"\xff\x00garbage")
    assert error is E.none
    synced = sync(group_client, "garbage", member, generation, b"\x00\xffnot an assignment")
    assert (synced.error_code, synced.assignment) == (E.none, b"\x00\xffnot an assignment")  # type: ignore[attr-defined]
    (described,) = group_client.request(describe_groups_request("garbage")).groups
    assert described.members[0].member_metadata == b"\xff\x00garbage"


def test_huge_member_metadata_fails_the_rebalance_like_kafka_and_others_carry_on(
    group_broker: RunningBroker, group_client: KafkaProtocolClient
) -> None:
    member, generation, error = join(group_client, "huge", metadata=b"\x00" * HUGE)
    assert error is E.none  # Kafka keeps it in memory too; storing the group fails
    failed = sync(group_client, "huge", member, generation, b"a")
    assert failed.error_code is E.unknown_server_error  # type: ignore[attr-defined]
    with group_broker.client() as other:
        small, small_generation, _ = join(other, "small")
        assert sync(other, "small", small, small_generation, b"b").error_code is E.none  # type: ignore[attr-defined]
    (huge,) = group_client.request(describe_groups_request("huge")).groups
    assert huge.group_state == "PreparingRebalance"
    assert still_serving(group_broker)


def test_unknown_groups_and_wrong_generations(group_client: KafkaProtocolClient) -> None:
    assert (
        group_client.request(heartbeat_request("nobody", 1, "m")).error_code is E.unknown_member_id
    )
    assert sync(group_client, "nobody", "m", 1, b"").error_code is E.unknown_member_id  # type: ignore[attr-defined]
    left = group_client.request(leave_group_request("nobody", "m"))
    assert (left.error_code, left.members[0].error_code) == (E.none, E.unknown_member_id)
    rejoin = group_client.request(join_group_request("nobody", "made-up-id", "t"))
    assert rejoin.error_code is E.unknown_member_id
    member, generation, _ = join(group_client, "g")
    assert group_client.request(heartbeat_request("g", generation + 7, member)).error_code is (
        E.illegal_generation
    )
    assert sync(group_client, "g", member, -3, b"").error_code is E.illegal_generation  # type: ignore[attr-defined]
    stale = offset_commit_request(
        "g", generation=generation + 1, member_id=member, topic="t", partition=0, offset=1
    )
    assert group_client.request(stale).topics[0].partitions[0].error_code is E.illegal_generation


def test_odd_group_ids_and_timeouts(
    group_broker: RunningBroker, group_client: KafkaProtocolClient
) -> None:
    assert group_client.request(join_group_request("", "", "t")).error_code is E.invalid_group_id
    assert group_client.request(heartbeat_request("", 1, "m")).error_code is E.invalid_group_id
    odd = "../../etc/passwd\u00e9\U0001f600" * 100
    member, generation, error = join(group_client, odd)
    assert error is E.none
    assert sync(group_client, odd, member, generation, b"x").error_code is E.none  # type: ignore[attr-defined]
    commit = offset_commit_request(
        odd, generation=generation, member_id=member, topic="t", partition=0, offset=3
    )
    assert group_client.request(commit).topics[0].partitions[0].error_code is E.none
    negative = JoinGroupRequest(
        group_id="negative",
        session_timeout=datetime.timedelta(milliseconds=-1),
        rebalance_timeout=datetime.timedelta(milliseconds=-1),
        member_id="",
        protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),),
    )
    assert group_client.request(negative).error_code is E.invalid_session_timeout
    no_protocols = dataclasses.replace(join_group_request("empty", "", "t"), protocols=())
    assert group_client.request(no_protocols).error_code is E.inconsistent_group_protocol
    group_broker.fault(kind="crash-restart")  # the odd group id survives recovery from disk
    with group_broker.client() as again:
        fetched = again.request(describe_groups_request(odd)).groups[0]
    assert (fetched.group_state, [m.member_id for m in fetched.members]) == ("Stable", [member])
    assert still_serving(group_broker)
