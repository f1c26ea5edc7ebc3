"""Play a :class:`~eoslab.probe.group_flows.GroupFlow` against a target's group coordinator.

The probe asks the bootstrap servers for the coordinator of a fresh group (FindCoordinator,
polled while the coordinator is still loading) and opens one connection per member to the
address it advertises. Every request and answer goes into :attr:`GroupFlowRun.exchanges`
with what the diff compares in its ``detail``: generations, whether the member leads, how many
members the leader was sent, assignments, offsets. Member ids differ from run to run; only
their shape (``client id-…``) is recorded.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eoslab.clock import now_ms, wait_until
from eoslab.kafka_api import error_name
from eoslab.probe.client import KafkaProtocolClient
from eoslab.probe.group_flows import (
    Commit,
    Describe,
    FetchOffsets,
    GroupFlow,
    Heartbeat,
    Join,
    Joined,
    Leave,
    Sleep,
    StillWaiting,
    Sync,
    Synced,
)
from eoslab.probe.requests import (
    describe_groups_request,
    find_coordinator_request,
    heartbeat_request,
    join_group_request,
    leave_group_request,
    offset_commit_request,
    offset_fetch_request,
    sync_group_request,
)
from eoslab.probe.runner import LEADER_LOOKUP_INTERVAL_S, NOT_READY, ProbeError
from eoslab.probe.transcript import NONE, Exchange, flow_run_json

COORDINATOR_LOOKUP_TIMEOUT_S = 60.0
CLIENT_ID = "eoslab-probe"
NO_GENERATION = -1


@dataclass
class MemberState:
    """What one member was told so far, and its connection."""

    client: KafkaProtocolClient
    member_id: str = ""
    generation: int = NO_GENERATION
    pending: Exchange | None = None


@dataclass
class GroupFlowRun:
    flow: GroupFlow
    target: str
    topic: str
    group: str
    coordinator: str | None = None
    exchanges: list[Exchange] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return flow_run_json(self)


def run_group_flow(flow: GroupFlow, bootstrap: str, target: str, topic: str) -> GroupFlowRun:
    """Play ``flow`` with a fresh group on ``topic`` (which must have ``flow.partitions``)."""
    run = GroupFlowRun(flow, target, topic, group=f"probe-{flow.name}-{uuid.uuid4().hex[:8]}")
    host, port = find_coordinator(bootstrap, run.group)
    run.coordinator = f"{host}:{port}"
    player = _Player(
        run,
        {
            n: MemberState(KafkaProtocolClient(host, port, client_id=CLIENT_ID))
            for n in flow.members
        },
    )
    try:
        for index, step in enumerate(flow.steps):
            player.play(index, step)
    finally:
        for member in player.members.values():
            member.client.close()
    return run


def find_coordinator(bootstrap: str, group: str) -> tuple[str, int]:
    """The coordinator's advertised address, once it serves the group: a fresh Kafka cluster
    creates __consumer_offsets on the first FindCoordinator (COORDINATOR_NOT_AVAILABLE), and the
    broker it names next may still be loading it or not yet lead it (NOT_COORDINATOR), so the
    answer is checked with a DescribeGroups there and everything is asked again meanwhile."""
    host, port = bootstrap.split(",", maxsplit=1)[0].rsplit(":", 1)
    last = [NONE]

    def serving() -> tuple[str, int] | None:
        with KafkaProtocolClient(host, int(port), client_id=CLIENT_ID) as client:
            (found,) = client.request(find_coordinator_request(group)).coordinators
        last[0] = error_name(found.error_code)
        if last[0] == NONE:
            with KafkaProtocolClient(found.host, int(found.port), client_id=CLIENT_ID) as there:
                (described,) = there.request(describe_groups_request(group)).groups
            last[0] = error_name(described.error_code)
        if last[0] not in (NONE, *NOT_READY):
            raise ProbeError(f"no coordinator for group {group}: {last[0]}")
        return (found.host, int(found.port)) if last[0] == NONE else None

    coordinator = wait_until(serving, COORDINATOR_LOOKUP_TIMEOUT_S, LEADER_LOOKUP_INTERVAL_S)
    if coordinator is None:
        raise ProbeError(f"no coordinator for group {group}: {last[0]}")
    return coordinator


@dataclass
class _Player:
    run: GroupFlowRun
    members: dict[str, MemberState]
    index: int = 0

    def play(self, index: int, step: Any) -> None:
        self.index = index
        group, topic = self.run.group, self.run.topic
        request: Any
        match step:
            case Join(member=name, session_ms=session, rebalance_ms=rebalance, fresh=fresh):
                member = self.members[name]
                if fresh:
                    member.member_id = ""
                request = join_group_request(
                    group, member.member_id, topic, session_ms=session, rebalance_ms=rebalance
                )
                member.pending = self._send("JoinGroup", name, request)
            case Joined(member=name):
                self._joined(name)
            case Sync(member=name, assign=assign):
                member = self.members[name]
                assignments = {self.members[n].member_id: text.encode() for n, text in assign}
                request = sync_group_request(
                    group, member.generation, member.member_id, assignments
                )
                member.pending = self._send("SyncGroup", name, request)
            case Synced(member=name):
                exchange, response = self._answer(name)
                exchange.detail = {
                    "assignment": bytes(response.assignment).decode(errors="replace")
                }
            case StillWaiting(member=name, wait_ms=wait_ms):
                member = self.members[name]
                exchange = self._exchange("(waiting)", name)
                waiting = member.pending is not None and not member.client.answer_ready(
                    wait_ms / 1000
                )
                exchange.answered_ms, exchange.error = now_ms(), NONE
                exchange.detail = {"waiting": waiting}
            case Heartbeat(member=name):
                member = self.members[name]
                request = heartbeat_request(group, member.generation, member.member_id)
                self._request(name, request, lambda r: r.error_code)
            case Commit(member=name, offset=offset, generation=generation):
                self._commit(name, offset, generation)
            case FetchOffsets(member=name, partitions=partitions):
                request = offset_fetch_request(group, topic, partitions)
                exchange, response = self._request(name, request, lambda r: r.groups[0].error_code)
                found = {
                    p.partition_index: int(p.committed_offset)
                    for t in response.groups[0].topics
                    for p in t.partitions
                }
                exchange.detail = {"offsets": [found.get(p) for p in partitions]}
            case Leave(member=name):
                request = leave_group_request(group, self.members[name].member_id)
                self._request(name, request, lambda r: r.members[0].error_code)
            case Describe():
                exchange, response = self._request(
                    None, describe_groups_request(group), lambda r: r.groups[0].error_code
                )
                described = response.groups[0]
                exchange.detail = {
                    "state": described.group_state,
                    "members": len(described.members),
                }
            case Sleep(ms=ms):
                time.sleep(ms / 1000)

    def _joined(self, name: str) -> None:
        member = self.members[name]
        exchange, response = self._answer(name)
        if response.member_id:
            member.member_id = response.member_id
        if exchange.error == NONE:
            member.generation = int(response.generation_id)
        names = {m.member_id: n for n, m in self.members.items()}
        exchange.detail = {
            "generation": int(response.generation_id),
            "leader": bool(response.leader) and response.leader == response.member_id,
            "members": sorted(names.get(m.member_id, "?") for m in response.members),
            "protocol": response.protocol_name,
            "member_id_shape": response.member_id.startswith(f"{CLIENT_ID}-"),
        }

    def _commit(self, name: str, offset: int, generation: int | None) -> None:
        member = self.members[name]
        request = offset_commit_request(
            self.run.group,
            generation=member.generation if generation is None else generation,
            member_id=member.member_id,
            topic=self.run.topic,
            partition=0,
            offset=offset,
        )
        self._request(name, request, lambda r: r.topics[0].partitions[0].error_code)

    def _exchange(self, api: str, name: str | None) -> Exchange:
        exchange = Exchange(step=self.index, api=api, sent_ms=now_ms(), tag=name)
        self.run.exchanges.append(exchange)
        return exchange

    def _send(self, api: str, name: str, request: Any) -> Exchange:
        exchange = self._exchange(api, name)
        self.members[name].client.send(request)
        return exchange

    def _answer(self, name: str) -> tuple[Exchange, Any]:
        """The answer to the member's pending JoinGroup or SyncGroup."""
        member = self.members[name]
        if member.pending is None:
            raise ProbeError(f"step {self.index} reads an answer {name} never asked for")
        exchange, member.pending = member.pending, None
        response = member.client.receive()
        exchange.answered_ms = now_ms()
        exchange.error = error_name(response.error_code)
        return exchange, response

    def _request(
        self, name: str | None, request: Any, error_of: Callable[[Any], Any]
    ) -> tuple[Exchange, Any]:
        """Send and read at once, on the member's connection (any member's for None)."""
        member = self.members[name] if name else next(iter(self.members.values()))
        exchange = self._exchange(request.__class__.__name__.removesuffix("Request"), name)
        response = member.client.request(request)
        exchange.answered_ms = now_ms()
        exchange.error = error_name(error_of(response))
        return exchange, response
