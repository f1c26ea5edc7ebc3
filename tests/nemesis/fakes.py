"""A lab the nemesis can break without breaking anything: every call is recorded, and each
fake answers what the nemesis asks for its evidence (pids, fault tallies, generations)."""

from __future__ import annotations

from typing import Any

from eoslab.rundir import ConsumerSessionInfo, SessionInfo
from eoslab.runtime.lab import ProcessObservation, ProcessState
from eoslab.runtime.status import LabError


class FakeRuntime:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.states: dict[str, ProcessObservation] = {}
        self.pids = 100
        self.kills_work = True
        """False: kill -9 leaves the process running (a fault the target never applied)."""
        self.untracked: set[str] = set()
        """Services the lab has no running process of: signalling one fails, as the lab does."""

    def observe(self, name: str) -> ProcessObservation:
        return self.states.setdefault(name, self._fresh())

    def _fresh(self) -> ProcessObservation:
        self.pids += 1
        return ProcessObservation(self.pids, ProcessState.RUNNING)

    def _signal(self, call: str, name: str) -> None:
        self.calls.append((call, name))
        if name in self.untracked:
            raise LabError(f"{name} is not running")

    def kill(self, name: str) -> None:
        self._signal("kill", name)
        if self.kills_work:
            self.states[name] = ProcessObservation(None, ProcessState.DEAD)

    def pause(self, name: str) -> None:
        self._signal("pause", name)
        self.states[name] = ProcessObservation(self.observe(name).pid, ProcessState.STOPPED)

    def resume(self, name: str) -> None:
        self.calls.append(("resume", name))
        self.states[name] = ProcessObservation(self.observe(name).pid, ProcessState.RUNNING)

    def restart(self, name: str) -> None:
        self.calls.append(("restart", name))
        self.states[name] = self._fresh()


class FakeProxy:
    def __init__(self) -> None:
        self.active: dict[str, dict[str, Any]] = {}
        self.added = 0
        self.injected = 3
        """What every fault has acted on when asked (0: a fault that never fired)."""

    def add(self, spec: Any) -> str:
        self.added += 1
        fault_id = f"f{self.added}"
        self.active[fault_id] = spec.model_dump(mode="json", exclude_none=True)
        return fault_id

    def remove(self, fault_id: str) -> None:
        del self.active[fault_id]

    def fault(self, fault_id: str) -> dict[str, Any]:
        frames = {"Produce": {"7": self.injected}} if self.injected else {}
        evidence = {"matched": 7, "injected": self.injected, "frames": frames}
        return {"id": fault_id, "evidence": evidence}


class FakeRefbroker:
    def __init__(self) -> None:
        self.applied: list[dict[str, Any]] = []
        self.cleared = 0
        self.dropped = 0
        """The broker's responses_dropped counter for Produce (a test moves it)."""
        self.judged: dict[str, int] = {}
        """Batches judged per producer-state rule set (a test moves it)."""
        self.cache_differs = 0
        """Retries the duplicate cache answered otherwise than Kafka's (a test moves it)."""
        self.reloaded = {"partitions": 3, "records": 120, "producers": 1}
        """What a crash-restart reloads from disk."""

    def apply(self, fault: dict[str, Any]) -> dict[str, Any]:
        self.applied.append(fault)
        effect = {"reloaded": self.reloaded} if fault["kind"] == "crash-restart" else {}
        return {"event": "fault-applied", **fault, **effect}

    def clear(self) -> dict[str, Any]:
        self.cleared += 1
        return {"event": "faults-cleared"}

    def counters(self) -> dict[str, Any]:
        return {
            "produce": {"judged": dict(self.judged), "cache_differs": self.cache_differs},
            "faults": {"responses_dropped": {"Produce": self.dropped}, "requests_failed": {}},
        }

    def state(self) -> dict[str, Any]:
        return {"coordinator_unavailable": {"remaining": 0}}


class FakeWorkload:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.transactional = False
        self.left_open: dict[str, Any] | None = {"txn": 3, "records": 20}
        """What a transactional session killed here leaves open (None: between two)."""
        self.in_flight = 5
        """Records in flight when a session is crashed."""
        self.unsettled: list[dict[str, Any] | None] = [{"txn": 3, "records": 20, "ending": False}]
        """What the running session's transaction is each time it is asked (the last answer
        repeats): None between two."""

    def crash(self, producer: int) -> tuple[SessionInfo, int]:
        self.calls.append(("crash", producer))
        crashed = SessionInfo(session_id=f"s{len(self.calls)}", producer=producer, started_ms=0)
        return crashed, self.in_flight

    def unsettled_transaction(self, producer: int) -> dict[str, Any] | None:
        return self.unsettled.pop(0) if len(self.unsettled) > 1 else self.unsettled[0]

    def open_transaction(self, session_id: str) -> dict[str, Any] | None:
        return self.left_open

    def restart(self, producer: int) -> SessionInfo:
        self.calls.append(("restart", producer))
        return SessionInfo(session_id=f"s{len(self.calls)}", producer=producer, started_ms=0)

    # the zombie: session "z" frozen, "n" its successor
    freezes = True
    """False: the session never freezes in an open transaction (it ended first)."""
    fenced = True
    """False: the resumed zombie is not fenced: it commits and ends without a fatal error."""
    late_errors: dict[str, int] = {}  # noqa: RUF012 (set per test, never changed in place)
    """With ``fenced``: the errors its late writes got; a zombie that got any ends without a
    fatal error, its transaction aborted (franz-go's recovery before KIP-890's second part)."""

    def freeze_mid_transaction(self, producer: int) -> tuple[SessionInfo, dict[str, Any] | None]:
        self.calls.append(("freeze", producer))
        frozen = {"open_txn": {"txn": 7, "acked": 3, "left": 17}, "producer_id": 4}
        zombie = SessionInfo(session_id="z" * 32, producer=producer, started_ms=0)
        return zombie, {**frozen, "producer_epoch": 0} if self.freezes else None

    def take_over(self, producer: int) -> SessionInfo:
        self.calls.append(("take_over", producer))
        return SessionInfo(session_id="n" * 32, producer=producer, started_ms=0)

    def resume(self, session_id: str) -> None:
        self.calls.append(("resume", session_id.count("z") // 32))

    def await_end(self, session_id: str, timeout_s: float) -> SessionInfo:
        fatal = "_FENCED" if self.fenced and not self.late_errors else None
        return SessionInfo(session_id=session_id, producer=0, started_ms=0, fatal=fatal)

    def progress(self, session_id: str) -> dict[str, Any]:
        zombie = session_id[0] == "z"
        late = {"late_errors": self.late_errors} if zombie else {}
        return {"producer_id": 4, "producer_epoch": 0 if zombie else 2, "sent": 20, **late}

    def transaction_settled(self, session_id: str, txn: int) -> dict[str, Any]:
        return {"outcome": "aborted" if self.fenced else "committed", "error": None}


class FakeConsumers:
    group = "eoslab-fake"

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.members = 2
        self.generation_now = 1
        self.effects_after_arming = True
        """False: an armed consumer applies no effect before it ends (the crash misses)."""
        self.evicts = True
        """False: the group does not move on while a consumer is frozen (it was only slow)."""
        self.formed = True
        """False: the group is not formed in a generation (a rebalance under way)."""
        self.admitted: dict[int, list[int]] = {}
        """Joined consumer -> the generations it was a member in."""
        self.rebalances = True
        """False: every joining consumer is let in by one rebalance, still to come."""
        self.reports_epoch_before = False
        """True: a joining consumer first reports the group's epoch of before its join (as a new
        KIP-848 member of librdkafka's can)."""
        self.sought: dict[str, int] | None = {"partition": 1, "from": 300, "to": 0}
        """What the next seek reports (None: no effect came to seek after)."""
        self.auto_commit = False
        self.at_crash: dict[str, Any] = {
            "left_in_batch": 3,
            "received": {"0": 120, "1": 95},
            "committed": {"0": 120, "1": 95},
        }
        """An auto-committing consumer's last progress line, at its crash."""

    def generation(self, excluding: int | None = None) -> int:
        return self.generation_now

    def settled(self) -> bool:
        return self.formed

    def generations(self, consumer: int) -> list[int]:
        return self.admitted.get(consumer, [])

    def crash_after_next_effect(self, consumer: int) -> tuple[ConsumerSessionInfo, bool]:
        self.calls.append(("crash", consumer))
        crashed = ConsumerSessionInfo(session_id="c1", consumer=consumer, started_ms=0)
        return crashed, self.effects_after_arming

    def progress(self, consumer: int) -> dict[str, Any]:
        return self.at_crash

    def restart(self, consumer: int) -> ConsumerSessionInfo:
        self.calls.append(("restart", consumer))
        return ConsumerSessionInfo(session_id="c2", consumer=consumer, started_ms=0)

    def freeze_after_next_effect(self, consumer: int) -> bool:
        self.calls.append(("freeze", consumer))
        self.generation_now += int(self.evicts)
        return True

    def resume(self, consumer: int) -> None:
        self.calls.append(("resume", consumer))

    def seek_after_next_effect(self, consumer: int, back: bool) -> dict[str, int] | None:
        self.calls.append(("seek back" if back else "seek forward", consumer))
        return self.sought

    def join(self) -> int:
        self.members += 1
        before = [self.generation_now] if self.reports_epoch_before else []
        if self.rebalances:
            self.generation_now += 1
            self.admitted[self.members - 1] = [*before, self.generation_now]
        else:  # one rebalance, still to come, lets in every consumer that joins
            self.admitted[self.members - 1] = [*before, self.generation_now + 1]
        self.calls.append(("join", self.members - 1))
        return self.members - 1

    def leave(self, consumer: int) -> None:
        self.calls.append(("leave", consumer))
