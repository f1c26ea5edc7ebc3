"""Active faults and the per-frame decision: which faults a frame triggers, and what happens to it.

Pure logic with an injectable clock, so selection and determinism are tested without sockets.
Faults are evaluated in the order they were added; once one drops or resets a frame, later
faults do not see it.
"""

import random
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field

from eoslab.clock import now_ms
from eoslab.kafka_api import api_name
from eoslab.proxy.fault_spec import (
    ANY,
    BandwidthSpec,
    BlackholeSpec,
    DelaySpec,
    Direction,
    DropRequestSpec,
    DropResponseSpec,
    FaultSpec,
    LatencySpec,
    ResetSpec,
    parse_fault_spec,
)

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class FrameContext:
    """What the proxy knows about a frame: where it goes and the request it belongs to."""

    route: str
    direction: Direction
    api_key: int
    api_version: int
    correlation_id: int
    size: int


class ActiveFault:
    """A fault spec in force: its trigger state (remaining count, random generator, window)."""

    def __init__(self, fault_id: str, spec: FaultSpec, seed: int | str, now: float) -> None:
        self.id = fault_id
        self.spec = spec
        self.seed = seed
        self.matched = 0
        self.injected = 0
        self._random = random.Random(seed)
        self._remaining = getattr(spec, "count", None)
        self._window_start, self._window_end = _window(spec, now)
        self._api_key = getattr(spec, "api_key", None)
        self._direction = _direction_of(spec)
        self._bandwidth_free_at = 0.0

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def exhausted(self) -> bool:
        """A count fault that has used up its count; it stays listed for its counters."""
        return self._remaining == 0

    def concerns_route(self, route: str) -> bool:
        return self.spec.route in (ANY, route)

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
        self.matched += 1
        if self._remaining == 0:
            return False
        probability = getattr(self.spec, "probability", None)
        if probability is not None and self._random.random() >= probability:
            return False
        if self._remaining is not None:
            self._remaining -= 1
        self.injected += 1
        return True

    def sample_delay_s(self) -> float:
        """The delay this fault adds to one frame (delay, latency)."""
        spec = self.spec
        if isinstance(spec, DelaySpec):
            return spec.ms / 1000
        if isinstance(spec, LatencySpec):
            low = spec.mean_ms - spec.jitter_ms
            high = spec.mean_ms + spec.jitter_ms
            return max(0.0, self._random.uniform(low, high)) / 1000
        return 0.0

    def reserve_bandwidth(self, size: int, ready_at: float) -> float:
        """When a frame of `size` bytes, ready at `ready_at`, has gone through the limit."""
        assert isinstance(self.spec, BandwidthSpec)
        done_at = max(ready_at, self._bandwidth_free_at) + size / self.spec.bytes_per_s
        self._bandwidth_free_at = done_at
        return done_at

    def frame_entry(
        self, frame: FrameContext, connection_id: int, delay_s: float = 0.0
    ) -> dict[str, object]:
        """The fault-log entry of this fault acting on one frame."""
        entry: dict[str, object] = {
            "fault_id": self.id,
            "kind": self.kind,
            "route": frame.route,
            "connection": connection_id,
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
        """The spec plus its id and trigger counters, as the control API lists it."""
        return {
            "id": self.id,
            "spec": self.spec.model_dump(mode="json", exclude_none=True),
            "seed": self.seed,
            "matched": self.matched,
            "injected": self.injected,
            "exhausted": self.exhausted,
        }


def _window(spec: FaultSpec, now: float) -> tuple[float, float]:
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


def _direction_of(spec: FaultSpec) -> Direction | None:
    if isinstance(spec, DropRequestSpec):
        return Direction.REQUEST
    if isinstance(spec, DropResponseSpec):
        return Direction.RESPONSE
    return getattr(spec, "direction", None)


@dataclass(slots=True)
class FrameVerdict:
    """What to do with a frame that triggered at least one fault."""

    hits: list[tuple[ActiveFault, float]] = field(default_factory=list)
    drop: bool = False
    reset: bool = False
    hold: bool = False
    deliver_at: float | None = None


class FaultTable:
    """The proxy's faults, keyed by id, and the decision for each frame.

    Ids are "f1", "f2", ... in order of addition; a fault without its own seed gets
    "<proxy seed>:<id>", so a proxy seed and a fault sequence replay the same injections.
    """

    def __init__(self, routes: Collection[str], seed: int, clock: Clock = time.monotonic) -> None:
        self.routes = tuple(routes)
        self._seed = seed
        self.clock = clock
        self._faults: dict[str, ActiveFault] = {}
        self._added = 0
        self._by_route: dict[str, tuple[ActiveFault, ...]] = {}
        self._listeners: list[Callable[[], None]] = []

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def add(self, spec: FaultSpec | dict[str, object]) -> ActiveFault:
        if isinstance(spec, dict):
            spec = parse_fault_spec(spec, self.routes)
        self._added += 1
        fault_id = f"f{self._added}"
        own_seed: int | None = getattr(spec, "seed", None)
        seed = own_seed if own_seed is not None else f"{self._seed}:{fault_id}"
        fault = ActiveFault(fault_id, spec, seed, self.clock())
        self._faults[fault_id] = fault
        self._changed()
        return fault

    def remove(self, fault_id: str) -> bool:
        removed = self._faults.pop(fault_id, None) is not None
        if removed:
            self._changed()
        return removed

    def clear(self) -> None:
        self._faults.clear()
        self._changed()

    def __iter__(self) -> Iterator[ActiveFault]:
        return iter(tuple(self._faults.values()))

    def for_route(self, route: str) -> tuple[ActiveFault, ...]:
        """The faults that may act on a route's frames; empty on the fast path."""
        faults = self._by_route.get(route)
        if faults is None:
            faults = tuple(
                fault
                for fault in self._faults.values()
                if fault.concerns_route(route) and not _is_immediate_reset(fault.spec)
            )
            self._by_route[route] = faults
        return faults

    def judge(self, frame: FrameContext, faults: tuple[ActiveFault, ...]) -> FrameVerdict | None:
        """The verdict for one frame, None when no fault fires (the frame passes untouched)."""
        now = self.clock()
        verdict: FrameVerdict | None = None
        delay_s = 0.0
        for fault in faults:
            if not fault.fires(frame, now):
                continue
            verdict = verdict or FrameVerdict()
            spec = fault.spec
            fault_delay_s = fault.sample_delay_s()
            verdict.hits.append((fault, fault_delay_s))
            if isinstance(spec, BlackholeSpec):
                verdict.hold = True
            elif isinstance(spec, DropRequestSpec | DropResponseSpec):
                verdict.drop = True
                verdict.reset = spec.reset
                return verdict
            elif isinstance(spec, ResetSpec):
                verdict.reset = True
                return verdict
            elif isinstance(spec, BandwidthSpec):
                verdict.deliver_at = fault.reserve_bandwidth(frame.size, now + delay_s)
                delay_s = verdict.deliver_at - now
            else:
                delay_s += fault_delay_s
                verdict.deliver_at = now + delay_s
        return verdict

    def blackhole_end(self, route: str) -> float | None:
        """While a route is cut off: when its current blackhole windows end (inf if never)."""
        now = self.clock()
        ends = [
            fault.window_end()
            for fault in self._faults.values()
            if isinstance(fault.spec, BlackholeSpec)
            and fault.concerns_route(route)
            and fault.in_window(now)
        ]
        return max(ends) if ends else None

    def _changed(self) -> None:
        self._by_route.clear()
        for listener in self._listeners:
            listener()


def _is_immediate_reset(spec: FaultSpec) -> bool:
    return isinstance(spec, ResetSpec) and spec.immediate
