"""A fault in force: its trigger state (remaining count, random generator, window) and the
tally of what it did, which the control API lists as its evidence."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from typing import Any

from eoslab.clock import now_ms
from eoslab.kafka_api import api_name
from eoslab.proxy.faults.spec import CONNECTION, FaultEvidence, FaultSpec, FrameContext


class ActiveFault:
    def __init__(self, fault_id: str, spec: FaultSpec, seed: int | str, now: float) -> None:
        self.id = fault_id
        self.spec = spec
        self.seed = seed
        self.matched = 0
        self.injected = 0
        self.random = random.Random(seed)
        self.bandwidth_free_at = 0.0
        self._remaining, self._probability, _ = spec.trigger()
        self._window_start, self._window_end = window_of(spec, now)
        self._api_key = spec.selected_api()
        self._direction = spec.selected_direction()
        self._examines = spec.examines()
        self.state: Any = spec.new_state()
        self.examined: Any = None
        self.watching = bool(spec.watched_apis())
        """It watches frames of some API on every route (a late copy waiting for a request)."""
        self._frames: defaultdict[str, Counter[int]] = defaultdict(Counter)
        self._delay_s = 0.0
        self._first_ms: int | None = None
        self._last_ms: int | None = None

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def exhausted(self) -> bool:
        """A count fault that has used up its count; it stays listed for its counters."""
        return self._remaining == 0

    def concerns_route(self, route: str) -> bool:
        return self.spec.route in ("*", route)

    def in_window(self, now: float) -> bool:
        return self._window_start <= now < self._window_end

    def window_end(self) -> float:
        return self._window_end

    def selects(self, frame: FrameContext) -> bool:
        return (
            self.concerns_route(frame.route)
            and (self._api_key is None or self._api_key == frame.api_key)
            and (self._direction is None or self._direction == frame.direction)
        )

    def fires(self, frame: FrameContext, now: float) -> bool:
        """Whether this frame triggers the fault; draws from the fault's generator if needed."""
        if not self.selects(frame) or not self.in_window(now):
            return False
        if self._examines:
            if self._remaining == 0:
                return False  # spent: no need to look inside
            self.examined = self.spec.examine(self, frame)
            if self.examined is None:
                return False
        self.matched += 1
        if self._remaining == 0:
            return False
        if self._probability is not None and self.random.random() >= self._probability:
            return False
        if self._remaining is not None:
            self._remaining -= 1
        self.injected += 1
        return True

    # ------------------------------------------------------------------ evidence
    def noted(self, api_key: int | None, connection: int, delay_s: float = 0.0) -> None:
        """It acted on a frame of ``api_key`` (None: on the whole connection)."""
        api = CONNECTION if api_key is None or api_key < 0 else api_name(api_key)
        self._frames[api][connection] += 1
        self._delay_s += delay_s
        moment = now_ms()
        self._first_ms = self._first_ms if self._first_ms is not None else moment
        self._last_ms = moment

    def acted_on_connection(self, connection: int) -> None:
        """It acted on a whole connection (an immediate reset, a stalled accept)."""
        self.matched += 1
        self.injected += 1
        self.noted(None, connection)

    def evidence(self) -> FaultEvidence:
        return FaultEvidence(
            matched=self.matched,
            injected=self.injected,
            frames={api: {str(c): n for c, n in per.items()} for api, per in self._frames.items()},
            delay_ms=round(self._delay_s * 1000, 3),
            first_ms=self._first_ms,
            last_ms=self._last_ms,
            **self.spec.state_evidence(self.state),
        )

    def frame_entry(self, frame: FrameContext, delay_s: float = 0.0) -> dict[str, object]:
        """The fault-log entry of this fault acting on one frame."""
        entry: dict[str, object] = {
            "fault_id": self.id,
            "kind": self.kind,
            "route": frame.route,
            "connection": frame.connection,
            "direction": frame.direction.value,
            "api": api_name(frame.api_key) if frame.api_key >= 0 else None,
            "api_key": frame.api_key,
            "correlation_id": frame.correlation_id,
        }
        if delay_s:
            entry["delay_ms"] = round(delay_s * 1000, 3)
        return entry

    def connection_entry(self, route: str, connection_id: int) -> dict[str, object]:
        """The fault-log entry of this fault acting on a whole connection (an immediate reset,
        a stalled accept)."""
        return {
            "fault_id": self.id,
            "kind": self.kind,
            "route": route,
            "connection": connection_id,
            "direction": None,
            "api": None,
            "api_key": None,
            "correlation_id": None,
        }

    def describe(self) -> dict[str, object]:
        """The spec plus its id, trigger counters and evidence, as the control API lists it."""
        return {
            "id": self.id,
            "spec": self.spec.model_dump(mode="json", exclude_none=True),
            "seed": self.seed,
            "matched": self.matched,
            "injected": self.injected,
            "exhausted": self.exhausted,
            "evidence": self.evidence().model_dump(mode="json"),
        }


def window_of(spec: FaultSpec, now: float) -> tuple[float, float]:
    """The window on the monotonic clock; absolute (epoch ms) bounds are converted once."""
    start, end = 0.0, float("inf")
    if spec.start_ms is not None:
        start = now + spec.start_ms / 1000
    if spec.end_ms is not None:
        end = now + spec.end_ms / 1000
    wall_ms = now_ms()
    if spec.start_at_ms is not None:
        start = now + (spec.start_at_ms - wall_ms) / 1000
    if spec.end_at_ms is not None:
        end = now + (spec.end_at_ms - wall_ms) / 1000
    return start, end
