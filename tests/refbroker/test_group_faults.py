"""The group faults of the control API, and the request faults applied to OffsetCommit (the
commit-lost case), seen by crafted requests and by a librdkafka consumer."""

from __future__ import annotations

from group_clients import RdkafkaMember, poll_until
from kio.schema.errors import ErrorCode
from refbroker_process import RunningBroker

from eoslab.probe.client import KafkaProtocolClient
from eoslab.probe.requests import (
    find_coordinator_request,
    heartbeat_request,
    join_group_request,
    offset_commit_request,
    offset_fetch_request,
    sync_group_request,
)
from eoslab.runtime.smoke import produce

E = ErrorCode


def stable(client: KafkaProtocolClient, group: str = "g") -> tuple[str, int]:
    member_id = client.request(join_group_request(group, "", "t")).member_id
    joined = client.request(join_group_request(group, member_id, "t"))
    client.request(sync_group_request(group, joined.generation_id, member_id, {member_id: b"x"}))
    return member_id, joined.generation_id


def commit(client: KafkaProtocolClient, member: str, generation: int, offset: int) -> ErrorCode:
    request = offset_commit_request(
        "g", generation=generation, member_id=member, topic="t", partition=0, offset=offset
    )
    return client.request(request).topics[0].partitions[0].error_code


def fetched(client: KafkaProtocolClient) -> int:
    response = client.request(offset_fetch_request("g", "t", (0,)))
    return int(response.groups[0].topics[0].partitions[0].committed_offset)


def test_force_rebalance_and_expire_member(
    group_broker: RunningBroker, group_client: KafkaProtocolClient
) -> None:
    member, generation = stable(group_client)
    assert group_broker.fault(kind="force-rebalance", group_id="g")["state"] == "PreparingRebalance"
    assert group_client.request(heartbeat_request("g", generation, member)).error_code is (
        E.rebalance_in_progress
    )
    assert group_broker.fault(kind="expire-member", group_id="g", member_id=member)["expired"] == [
        member
    ]
    assert group_client.request(heartbeat_request("g", generation, member)).error_code is (
        E.unknown_member_id
    )
    assert group_broker.counters()["groups"]["members_expired"] == 1
    for body in (
        {"kind": "force-rebalance", "group_id": "nope"},
        {"kind": "expire-member", "group_id": "g", "member_id": "ghost"},
        {"kind": "coordinator-unavailable", "count": 1, "error": "UNKNOWN_MEMBER_ID"},
    ):
        status, answer = group_broker.control("POST", "/faults", body)
        assert status == 400, body
        assert "error" in answer


def test_coordinator_unavailable_for_the_next_requests(
    group_broker: RunningBroker, group_client: KafkaProtocolClient
) -> None:
    member, generation = stable(group_client)
    group_broker.fault(kind="coordinator-unavailable", count=2)
    assert group_broker.control("GET", "/faults")[1]["coordinator_unavailable"] == {
        "remaining": 2,
        "error": "COORDINATOR_NOT_AVAILABLE",
    }
    (found,) = group_client.request(find_coordinator_request("g")).coordinators
    assert (found.error_code, found.node_id) == (E.coordinator_not_available, -1)
    assert commit(group_client, member, generation, 5) is E.coordinator_not_available
    assert commit(group_client, member, generation, 5) is E.none
    group_broker.fault(kind="coordinator-unavailable", count=5, error="NOT_COORDINATOR")
    assert group_client.request(heartbeat_request("g", generation, member)).error_code is (
        E.not_coordinator
    )
    assert group_broker.control("DELETE", "/faults")[0] == 200
    assert group_client.request(heartbeat_request("g", generation, member)).error_code is E.none


def test_a_failed_commit_is_not_applied_and_a_lost_commit_response_is(
    group_broker: RunningBroker, group_client: KafkaProtocolClient
) -> None:
    member, generation = stable(group_client)
    assert commit(group_client, member, generation, 1) is E.none
    group_broker.fault(kind="fail-request", api="OffsetCommit", count=1, error="REQUEST_TIMED_OUT")
    assert commit(group_client, member, generation, 2) is E.request_timed_out
    assert fetched(group_client) == 1
    group_broker.fault(kind="drop-response", api="OffsetCommit", count=1, reset=False)
    lost = group_client.send(
        offset_commit_request(
            "g", generation=generation, member_id=member, topic="t", partition=0, offset=3
        )
    )
    assert fetched(group_client) == 3  # applied, though its answer never came
    assert lost not in group_client.unanswered()
    faults = group_broker.counters()["faults"]
    assert faults == {
        "responses_dropped": {"OffsetCommit": 1},
        "requests_failed": {"OffsetCommit": 1},
        "requests_lost": {},
    }


def test_librdkafka_commit_whose_response_is_lost(group_broker: RunningBroker) -> None:
    """The commit-lost case with a real group_client: the connection resets after the commit was
    applied; librdkafka sends the commit again on a new connection and reports success."""
    produce(group_broker.bootstrap, "t", 2, 200)
    member = RdkafkaMember(group_broker.bootstrap, "lost", "t")
    try:
        poll_until([member], lambda: len(member.records) == 200, "every record read")
        group_broker.fault(kind="drop-response", api="OffsetCommit", count=1)
        member.commit()
        assert member.committed({0, 1}) == {0: 100, 1: 100}
    finally:
        member.close()
    counters = group_broker.counters()
    assert counters["faults"]["responses_dropped"] == {"OffsetCommit": 1}
    assert counters["requests"]["OffsetCommit"] == 2  # the lost one and its resend
