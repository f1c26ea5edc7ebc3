"""A lab the nemesis can break without breaking anything: every call is recorded."""

from __future__ import annotations

from typing import Any

from eoslab.rundir import ConsumerSessionInfo, SessionInfo


class FakeRuntime:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def kill(self, name: str) -> None:
        self.calls.append(("kill", name))

    def pause(self, name: str) -> None:
        self.calls.append(("pause", name))

    def resume(self, name: str) -> None:
        self.calls.append(("resume", name))

    def restart(self, name: str) -> None:
        self.calls.append(("restart", name))


class FakeProxy:
    def __init__(self) -> None:
        self.active: dict[str, dict[str, Any]] = {}
        self.added = 0

    def add(self, spec: Any) -> str:
        self.added += 1
        fault_id = f"f{self.added}"
        self.active[fault_id] = spec.model_dump(mode="json", exclude_none=True)
        return fault_id

    def remove(self, fault_id: str) -> None:
        del self.active[fault_id]

    def faults(self) -> list[dict[str, Any]]:
        return [{"id": i, "matched": 7, "injected": 3} for i in self.active]


class FakeRefbroker:
    def __init__(self) -> None:
        self.applied: list[dict[str, Any]] = []
        self.cleared = 0

    def apply(self, fault: dict[str, Any]) -> dict[str, Any]:
        self.applied.append(fault)
        return {"event": "fault-applied", **fault}

    def clear(self) -> dict[str, Any]:
        self.cleared += 1
        return {"event": "faults-cleared"}


class FakeWorkload:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def crash(self, producer: int) -> SessionInfo:
        self.calls.append(("crash", producer))
        return SessionInfo(session_id=f"s{len(self.calls)}", producer=producer, started_ms=0)

    def restart(self, producer: int) -> SessionInfo:
        self.calls.append(("restart", producer))
        return SessionInfo(session_id=f"s{len(self.calls)}", producer=producer, started_ms=0)


class FakeConsumers:
    group = "eoslab-fake"

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.members = 2
        self.effects_after_arming = True
        """False: an armed consumer applies no effect before it ends (the crash misses)."""

    def crash_after_next_effect(self, consumer: int) -> tuple[ConsumerSessionInfo, bool]:
        self.calls.append(("crash", consumer))
        crashed = ConsumerSessionInfo(session_id="c1", consumer=consumer, started_ms=0)
        return crashed, self.effects_after_arming

    def restart(self, consumer: int) -> ConsumerSessionInfo:
        self.calls.append(("restart", consumer))
        return ConsumerSessionInfo(session_id="c2", consumer=consumer, started_ms=0)

    def freeze_after_next_effect(self, consumer: int) -> bool:
        self.calls.append(("freeze", consumer))
        return True

    def resume(self, consumer: int) -> None:
        self.calls.append(("resume", consumer))

    def join(self) -> int:
        self.members += 1
        self.calls.append(("join", self.members - 1))
        return self.members - 1

    def leave(self, consumer: int) -> None:
        self.calls.append(("leave", consumer))
