"""The proxy's faults, keyed by id, and the decision for each frame.

Pure logic with an injectable clock, so selection and determinism are tested without sockets.
Faults are evaluated in the order they were added; once one drops or resets a frame, later
faults do not see it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator

from eoslab.proxy.faults import parse_fault_spec
from eoslab.proxy.faults.active import ActiveFault
from eoslab.proxy.faults.blackhole import BlackholeSpec
from eoslab.proxy.faults.spec import FaultSpec, FrameContext, FrameVerdict

Clock = Callable[[], float]


class FaultTable:
    """Ids are "f1", "f2", ... in order of addition; a fault without its own seed gets
    "<proxy seed>:<id>", so a proxy seed and a fault sequence replay the same injections."""

    def __init__(self, routes: Collection[str], seed: int, clock: Clock = time.monotonic) -> None:
        self.routes = tuple(routes)
        self._seed = seed
        self.clock = clock
        self._faults: dict[str, ActiveFault] = {}
        self._added = 0
        self._by_route: dict[str, tuple[ActiveFault, ...]] = {}
        self._watching = False
        """Some fault watches frames on every route (``ActiveFault.watching``)."""
        self._listeners: list[Callable[[], None]] = []

    def add_route(self, route: str) -> None:
        """A route opened after the proxy started (fronting: a broker first named now)."""
        self.routes = (*self.routes, route)

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def add(self, spec: FaultSpec | dict[str, object]) -> ActiveFault:
        if isinstance(spec, dict):
            spec = parse_fault_spec(spec, self.routes)
        self._added += 1
        fault_id = f"f{self._added}"
        own_seed = spec.trigger()[2]
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
        """The faults that may act on (or watch) a route's frames; empty on the fast path."""
        faults = self._by_route.get(route)
        if faults is None:
            faults = tuple(
                fault
                for fault in self._faults.values()
                if (fault.concerns_route(route) or fault.watching) and fault.spec.per_frame()
            )
            self._by_route[route] = faults
        return faults

    def judge(self, frame: FrameContext, faults: tuple[ActiveFault, ...]) -> FrameVerdict | None:
        """The verdict for one frame, None when no fault fires (the frame passes untouched)."""
        now = self.clock()
        if self._watching:
            for fault in faults:
                if fault.watching:
                    fault.spec.watch(fault, frame)
        verdict: FrameVerdict | None = None
        for fault in faults:
            if not fault.fires(frame, now):
                continue
            verdict = verdict or FrameVerdict(now)
            if fault.spec.act(fault, verdict, frame):
                break
        return verdict

    def blackholes(self, route: str) -> list[ActiveFault]:
        """The blackholes cutting a route off now."""
        now = self.clock()
        return [
            fault
            for fault in self._faults.values()
            if isinstance(fault.spec, BlackholeSpec)
            and fault.concerns_route(route)
            and fault.in_window(now)
        ]

    def blackhole_end(self, route: str) -> float | None:
        """While a route is cut off: when its current blackhole windows end (inf if never)."""
        ends = [fault.window_end() for fault in self.blackholes(route)]
        return max(ends) if ends else None

    def _changed(self) -> None:
        self._by_route.clear()
        self._watching = any(fault.watching for fault in self._faults.values())
        for listener in self._listeners:
            listener()
