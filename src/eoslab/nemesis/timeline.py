"""Fault timelines: when each step starts and ends, and the thread that plays them.

A scenario lists steps (`steps/`). Each starts at an offset (``at``: seconds from the
workload's start, or ``after_acked``: once that many records are acknowledged; ``at: 0`` is in
place *before* the workload starts, so that it meets the clients' very first requests:
InitProducerId, FindCoordinator, the first Metadata), optionally
shifted by a seeded ``jitter``, and steps that end have a ``duration`` (or an ``until``
offset). Targets are a service (``kafka-2``, ``kafka4-1``, ``refbroker``), ``random-broker`` (a
seeded pick), ``leader`` (the current leader of ``partition``), ``coordinator`` (the group's)
or ``controller`` (the active one), looked up when the step starts.

:func:`resolve` turns the steps into :class:`ResolvedStep` s for one target and seed, with
every random choice made: the same scenario and seed give the same timeline.
:class:`TimelineRunner` then plays them beside the workload, on a clock it is given.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Protocol

from eoslab.nemesis.steps import AnyStep
from eoslab.nemesis.steps.base import CONTROLLER, COORDINATOR, LEADER, RANDOM_BROKER, ResolvedStep
from eoslab.rundir import LabTarget
from eoslab.runtime.topology import REFBROKER_SERVICE, brokers_of


def resolve(steps: Sequence[AnyStep], target: LabTarget, seed: int) -> list[ResolvedStep]:
    """The steps that apply to ``target``, with jitter and random targets drawn from ``seed``."""
    rng = random.Random(f"timeline:{seed}:{target}")
    resolved = []
    for index, step in enumerate(steps):
        shift = rng.uniform(0.0, step.jitter) if step.jitter else 0.0
        pick = rng.choice(brokers_of(target))
        if step.on is not None and target not in step.on:
            continue
        service = step.service_target
        if service == RANDOM_BROKER:
            service = pick
        elif service in (LEADER, COORDINATOR, CONTROLLER) and target == "refbroker":
            service = REFBROKER_SERVICE
        resolved.append(
            ResolvedStep(
                index=index,
                kind=step.kind,
                at_s=None if step.at is None else round(step.at + shift, 3),
                after_acked=step.after_acked,
                duration_s=step.length_s,
                target=service,
                step=step,
            )
        )
    return resolved


class StepExecutor(Protocol):
    """What plays a step (the nemesis): start it, end it (steps with a duration only), or
    note that it never ran."""

    def start(self, step: ResolvedStep) -> None: ...
    def end(self, step: ResolvedStep) -> None: ...
    def skip(self, step: ResolvedStep, reason: str) -> None: ...


class TimelineRunner(threading.Thread):
    """Plays resolved steps beside the workload: starts each at its trigger, ends it after its
    duration. Steps whose trigger has not come when the workload is done are skipped.

    The starts due at one tick play in a thread of their own (``concurrent``), one after the
    other in the scenario's order (librdkafka-3584 installs two faults at one trigger, in an
    order that matters), and so do the ends: a step that blocks (a broker's restart waits until
    it is back, a consumer crash until its effect) never holds up a later trigger:
    coordinator-kill-at-least-once's crash, due at 1,000 acks, came after the restart of the
    killed coordinator (18 s under load), with every record consumed. A step's end still comes
    only after its start has returned, its duration counted from then.

    :meth:`tick` does one round at a given time, so the timeline can be driven by a fake clock
    (``concurrent=False``: each action played before ``tick`` returns); the thread calls it
    every ``tick_s`` on ``clock``, and once done or stopped waits for the actions in flight."""

    def __init__(
        self,
        steps: list[ResolvedStep],
        executor: StepExecutor,
        *,
        acked: Callable[[], int],
        workload_done: Callable[[], bool],
        tick_s: float = 0.02,
        clock: Callable[[], float] = time.monotonic,
        concurrent: bool = True,
    ) -> None:
        super().__init__(name="nemesis-timeline", daemon=True)
        self._pending = list(steps)
        self._active: list[tuple[float, ResolvedStep]] = []
        self._in_flight: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._executor = executor
        self._acked = acked
        self._workload_done = workload_done
        self._tick_s = tick_s
        self._clock = clock
        self._concurrent = concurrent
        self._origin: float | None = None
        self._stop_requested = threading.Event()
        self.error: BaseException | None = None

    @property
    def done(self) -> bool:
        with self._lock:
            busy = any(thread.is_alive() for thread in self._in_flight)
            return not (self._pending or self._active or busy)

    def prime(self) -> bool:
        """Start the steps due at once (``at: 0``), before the workload starts: a fault in place
        before the first client is made; whether there was one. The thread's clock starts
        later, with the workload."""
        due = [s for s in self._pending if s.at_s == 0]
        for step in due:
            self._pending.remove(step)
            self._begin(step)
        return bool(due)

    def _begin(self, step: ResolvedStep) -> None:
        self._executor.start(step)
        if step.duration_s is not None:  # the fault lasts from when it is in place
            with self._lock:
                self._active.append((self._clock() + step.duration_s, step))

    def _play(self, name: str, action: Callable[[], None]) -> None:
        """One start or end: in a thread of its own when concurrent, else now."""
        if not self._concurrent:
            action()
            return

        def guarded() -> None:
            try:
                action()
            except BaseException as error:  # reported by the run executor, which heals
                self.error = self.error or error

        thread = threading.Thread(target=guarded, name=f"nemesis-{name}", daemon=True)
        with self._lock:  # alive before `done` can look at it
            self._in_flight = [t for t in self._in_flight if t.is_alive()] + [thread]
            thread.start()

    def stop(self) -> None:
        self._stop_requested.set()

    def run(self) -> None:
        try:
            while not self.done and not self._stop_requested.is_set() and self.error is None:
                self.tick(self._clock())
                self._stop_requested.wait(self._tick_s)
        except BaseException as error:  # reported by the run executor, which heals
            self.error = error
        finally:
            with self._lock:
                in_flight = list(self._in_flight)
            for thread in in_flight:
                thread.join()

    def tick(self, now: float) -> None:
        """Start the steps due at ``now``, skip the pending ones once the workload is done, end
        the active ones whose time has come."""
        if self._origin is None:
            self._origin = now
        elapsed = now - self._origin
        due = [s for s in self._pending if self._due(s, elapsed)]
        for step in due:
            self._pending.remove(step)
        if due:  # one after the other, in the scenario's order
            self._play(_name("start", due), partial(_each, self._begin, due))
        if self._pending and self._workload_done():
            for step in self._pending:
                self._executor.skip(step, "the workload finished before its trigger")
            self._pending.clear()
        with self._lock:
            ending = [a for a in self._active if a[0] <= now]
            for moment_and_step in ending:
                self._active.remove(moment_and_step)
        if ending:
            steps = [step for _, step in ending]
            self._play(_name("end", steps), partial(_each, self._executor.end, steps))

    def _due(self, step: ResolvedStep, elapsed_s: float) -> bool:
        if step.at_s is not None:
            return elapsed_s >= step.at_s
        return step.after_acked is not None and self._acked() >= step.after_acked


def _each(action: Callable[[ResolvedStep], None], steps: list[ResolvedStep]) -> None:
    for step in steps:
        action(step)


def _name(what: str, steps: list[ResolvedStep]) -> str:
    return f"{what}-{'-'.join(str(step.index) for step in steps)}"
