"""The rebalance protocol (seed 004) as probe programs: data that runs the same on any target.

A group flow names its members and lists steps; the runner (:mod:`eoslab.probe.group_runner`)
gives every member its own connection to the group's coordinator (JoinGroup and SyncGroup
answers may wait at the coordinator, as the seed's barrier says) and plays the steps in order:

- :class:`Join` sends a JoinGroup with the member id the member holds (none at first, or when
  ``fresh``); :class:`Joined` reads its answer, and the member keeps the member id, generation
  and leadership it was given (a MEMBER_ID_REQUIRED answer hands out the id to rejoin with);
- :class:`Sync` sends a SyncGroup at the member's generation, with ``assign`` (member name ->
  assignment) when it leads; :class:`Synced` reads the assignment;
- :class:`StillWaiting` checks that the member's last request has no answer yet (the barrier);
- :class:`Heartbeat`, :class:`Commit` (offset of partition 0 at the member's generation, or at
  ``generation``), :class:`FetchOffsets`, :class:`Leave`, :class:`Describe` are answered at
  once; :class:`Sleep` lets time pass (a session running out).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Join:
    member: str
    session_ms: int = 10_000
    rebalance_ms: int = 30_000
    fresh: bool = False
    """Send an empty member id, as a client does after UNKNOWN_MEMBER_ID."""


@dataclass(frozen=True)
class Joined:
    member: str


@dataclass(frozen=True)
class Sync:
    member: str
    assign: tuple[tuple[str, str], ...] = ()
    """(member name, assignment text) when the member leads."""


@dataclass(frozen=True)
class Synced:
    member: str


@dataclass(frozen=True)
class StillWaiting:
    member: str
    wait_ms: int = 500


@dataclass(frozen=True)
class Heartbeat:
    member: str


@dataclass(frozen=True)
class Commit:
    member: str
    offset: int
    generation: int | None = None
    """None: the member's current generation."""


@dataclass(frozen=True)
class FetchOffsets:
    member: str
    partitions: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class Leave:
    member: str


@dataclass(frozen=True)
class Describe:
    pass


@dataclass(frozen=True)
class Sleep:
    ms: int


GroupStep = (
    Join
    | Joined
    | Sync
    | Synced
    | StillWaiting
    | Heartbeat
    | Commit
    | FetchOffsets
    | Leave
    | Describe
    | Sleep
)


@dataclass(frozen=True)
class GroupFlow:
    name: str
    seed: str
    description: str
    members: tuple[str, ...]
    steps: tuple[GroupStep, ...]
    partitions: int = 2
    """Partitions of the flow's topic (commits and fetches name partitions of it)."""


def first_join(member: str, session_ms: int = 10_000) -> tuple[GroupStep, ...]:
    """JoinGroup v4+ without a member id: MEMBER_ID_REQUIRED, then the join with that id."""
    return (
        Join(member, session_ms=session_ms, fresh=True),
        Joined(member),
        Join(member, session_ms=session_ms),
    )


JOIN_BARRIER = GroupFlow(
    name="group-join-barrier",
    seed="004 rebalance protocol",
    description=(
        "a joins alone (generation 1) and syncs; b joins and waits at the barrier while a is "
        "told REBALANCE_IN_PROGRESS by its heartbeat; when a rejoins both are answered "
        "(generation 2, a the leader with both members' metadata); b's SyncGroup waits for "
        "the leader's assignment and then gets its share."
    ),
    members=("a", "b"),
    steps=(
        *first_join("a"),
        Joined("a"),
        Sync("a", assign=(("a", "0,1"),)),
        Synced("a"),
        *first_join("b"),
        StillWaiting("b"),
        Heartbeat("a"),
        Join("a"),
        Joined("a"),
        Joined("b"),
        Sync("b"),
        StillWaiting("b"),
        Sync("a", assign=(("a", "0"), ("b", "1"))),
        Synced("a"),
        Synced("b"),
        Heartbeat("a"),
        Heartbeat("b"),
        Describe(),
    ),
)

STALE_COMMIT = GroupFlow(
    name="group-stale-commit",
    seed="004 zombie consumer",
    description=(
        "a commits in generation 1; b's join starts a rebalance (commits still accepted); in "
        "generation 2, before the assignment, commits get REBALANCE_IN_PROGRESS; afterwards a "
        "commit at the stale generation 1 gets ILLEGAL_GENERATION, one without membership "
        "UNKNOWN_MEMBER_ID, and only the current generation's commit lands; a partition never "
        "committed fetches as -1."
    ),
    members=("a", "b", "zombie"),
    steps=(
        *first_join("a"),
        Joined("a"),
        Sync("a", assign=(("a", "0,1"),)),
        Synced("a"),
        Commit("a", 3),
        *first_join("b"),
        Commit("a", 4),
        Join("a"),
        Joined("a"),
        Joined("b"),
        Commit("b", 5),
        Sync("b"),
        Sync("a", assign=(("a", "0"), ("b", "1"))),
        Synced("a"),
        Synced("b"),
        Commit("a", 6, generation=1),
        Commit("zombie", 7, generation=2),
        Commit("a", 8),
        FetchOffsets("a", partitions=(0, 1)),
    ),
)

REJOIN_AFTER_EXPIRY = GroupFlow(
    name="group-rejoin-after-expiry",
    seed="004 session timeout",
    description=(
        "a (session 6 s, Kafka's minimum) commits in generation 1, then goes silent for 9 s: "
        "its session expires and the group empties (generation 2). Its heartbeat, its commit "
        "and its rejoin under the old member id get UNKNOWN_MEMBER_ID; a fresh join gets "
        "generation 3, and the committed offset is still there."
    ),
    members=("a",),
    steps=(
        *first_join("a", session_ms=6_000),
        Joined("a"),
        Sync("a", assign=(("a", "0"),)),
        Synced("a"),
        Commit("a", 2),
        Sleep(9_000),
        Heartbeat("a"),
        Commit("a", 3),
        Describe(),
        Join("a", session_ms=6_000),
        Joined("a"),
        *first_join("a", session_ms=6_000),
        Joined("a"),
        Sync("a", assign=(("a", "0"),)),
        Synced("a"),
        FetchOffsets("a"),
        Leave("a"),
        Describe(),
    ),
)

GROUP_FLOWS: dict[str, GroupFlow] = {
    flow.name: flow for flow in (JOIN_BARRIER, STALE_COMMIT, REJOIN_AFTER_EXPIRY)
}
