"""Helpers for the pure-logic group tests: a fake clock that also runs timers, and requests."""

from __future__ import annotations

import heapq
import itertools
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from eoslab.refbroker.groups.classic_group import JoinResult, SyncResult
from eoslab.refbroker.groups.group_coordinator import JoinRequest, SyncRequest

CONSUMER = "consumer"


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocol subscription v0: version, topics, null user data."""
    encoded = b"".join(struct.pack(">h", len(t)) + t.encode() for t in topics)
    return struct.pack(">hi", 0, len(topics)) + encoded + struct.pack(">i", -1)


@dataclass
class FakeTimer:
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class FakeTime:
    """The clock (milliseconds) and the scheduler of a coordinator under test: timers run, in
    order, only when the test advances the time."""

    now: int = 1_000_000
    _timers: list[tuple[int, int, Callable[[], None], FakeTimer]] = field(default_factory=list)
    _sequence: itertools.count[int] = field(default_factory=itertools.count)

    def __call__(self) -> int:
        return self.now

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer()
        due = self.now + round(delay_s * 1000)
        heapq.heappush(self._timers, (due, next(self._sequence), callback, timer))
        return timer

    def advance(self, ms: int) -> None:
        target = self.now + ms
        while self._timers and self._timers[0][0] <= target:
            due, _, callback, timer = heapq.heappop(self._timers)
            self.now = max(self.now, due)
            if not timer.cancelled:
                callback()
        self.now = target


def join_request(
    group: str = "g",
    member_id: str = "",
    *,
    instance: str | None = None,
    protocols: tuple[tuple[str, bytes], ...] = (("range", subscription("t")),),
    session_ms: int = 10_000,
    rebalance_ms: int = 30_000,
    require_known_member_id: bool = False,
    client_id: str = "client",
    skip_assignment: bool = False,
    protocol_type: str = CONSUMER,
) -> JoinRequest:
    return JoinRequest(
        group_id=group,
        member_id=member_id,
        group_instance_id=instance,
        require_known_member_id=require_known_member_id,
        support_skipping_assignment=skip_assignment,
        client_id=client_id,
        client_host="/127.0.0.1",
        rebalance_timeout_ms=rebalance_ms,
        session_timeout_ms=session_ms,
        protocol_type=protocol_type,
        protocols=protocols,
    )


def sync_request(
    group: str,
    generation: int,
    member_id: str,
    assignments: dict[str, bytes] | None = None,
    *,
    instance: str | None = None,
) -> SyncRequest:
    return SyncRequest(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=None,
        protocol_name=None,
        assignments=assignments or {},
    )


class Answers:
    """Collects what callbacks receive; `last` is the latest answer (or None)."""

    def __init__(self) -> None:
        self.received: list[JoinResult | SyncResult] = []

    def __call__(self, result: JoinResult | SyncResult) -> None:
        self.received.append(result)

    @property
    def last(self) -> JoinResult | SyncResult | None:
        return self.received[-1] if self.received else None
