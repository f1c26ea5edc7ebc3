"""The nemesis: plays timeline steps on the lab, logs each to faults.jsonl, and heals.

Process faults go through the lab runtime (kill -9, SIGSTOP/SIGCONT, restart), network faults
through the chaos proxy's control API, state faults through the reference broker's, producer
crashes through the workload. Each step says how to undo what it broke
(:meth:`Nemesis.broke`); its end undoes it, and :meth:`Nemesis.heal` undoes whatever is
still broken, last broken first, even when the run fails halfway.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eoslab.admin import LeaderLookupError, active_controller, group_coordinator, leader_of
from eoslab.clock import now_ms
from eoslab.nemesis.steps.base import CONTROLLER, COORDINATOR, LEADER
from eoslab.nemesis.timeline import ResolvedStep
from eoslab.proxy.control_client import ProxyControl
from eoslab.refbroker.control_client import RefbrokerControl
from eoslab.rundir import LabTarget, RunDir
from eoslab.runtime.lab import ProcessFaults
from eoslab.runtime.topology import REFBROKER_SERVICE, broker_service
from eoslab.workload.consumer_workload import ConsumerWorkload
from eoslab.workload.supervisor import Workload


class NemesisError(RuntimeError):
    """A step could not be played (the message says which and why)."""


@dataclass
class _Damage:
    repair: str
    undo: Callable[[], object]
    memo: dict[str, Any] = field(default_factory=dict)


class Nemesis:
    def __init__(
        self,
        *,
        run_dir: RunDir,
        target: LabTarget,
        runtime: ProcessFaults,
        bootstrap: str,
        topic: str,
        proxy: ProxyControl,
        refbroker: RefbrokerControl | None,
        workload: Workload | None = None,
        consumers: ConsumerWorkload | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.target = target
        self.runtime = runtime
        self.bootstrap = bootstrap
        self.topic = topic
        self._proxy = proxy
        self._refbroker = refbroker
        self._workload = workload
        self._consumers = consumers
        self._lock = threading.Lock()
        self._services: dict[int, str] = {}
        self._damage: dict[int, _Damage] = {}
        self.errors: list[str] = []
        """Steps that failed (also in faults.jsonl); the run goes on and reports them."""

    # ---------------------------------------------------------------- StepExecutor
    def start(self, step: ResolvedStep) -> None:
        try:
            step.step.start(self, step)
        except Exception as error:
            self.errors.append(f"step {step.index} ({step.kind}) start: {error}")
            self.log(step.kind, step.target, "instant", step=step.index, error=str(error))

    def end(self, step: ResolvedStep) -> None:
        try:
            step.step.end(self, step)
        except Exception as error:
            self.errors.append(f"step {step.index} ({step.kind}) end: {error}")
            self.log(step.kind, step.target, "end", step=step.index, error=str(error))

    def skip(self, step: ResolvedStep, reason: str) -> None:
        self.log(step.kind, step.target, "instant", step=step.index, skipped=reason)

    # ---------------------------------------------------------------- StepContext
    def log(self, kind: str, target: str | None, phase: str, **detail: Any) -> None:
        self.run_dir.append_jsonl(
            self.run_dir.faults_jsonl,
            {"ts_ms": now_ms(), "kind": kind, "target": target, "phase": phase, "detail": detail},
        )

    def service(self, step: ResolvedStep) -> str:
        """The step's service; "leader" is looked up once, when the step starts."""
        with self._lock:
            known = self._services.get(step.index)
        if known is not None:
            return known
        service = step.target
        if service == LEADER:
            service = self.leader_of(getattr(step.step, "partition", 0))
        elif service == COORDINATOR:
            service = self.coordinator()
        elif service == CONTROLLER:
            service = self.controller()
        if service is None:
            raise NemesisError(f"step {step.index} ({step.kind}) has no target")
        with self._lock:
            self._services[step.index] = service
        return service

    def leader_of(self, partition: int) -> str:
        """The service leading ``partition`` of the run's topic now."""
        if self.target == "refbroker":
            return REFBROKER_SERVICE
        try:
            return broker_service(self.target, leader_of(self.bootstrap, self.topic, partition))
        except LeaderLookupError as error:
            raise NemesisError(str(error)) from error

    def coordinator(self) -> str:
        """The service coordinating the run's consumer group now."""
        if self.target == "refbroker":
            return REFBROKER_SERVICE
        try:
            group = self.consumers().group
            return broker_service(self.target, group_coordinator(self.bootstrap, group))
        except LeaderLookupError as error:
            raise NemesisError(str(error)) from error

    def controller(self) -> str:
        """The service that is the target's active controller now."""
        if self.target == "refbroker":
            return REFBROKER_SERVICE
        try:
            found = active_controller(self.bootstrap, kraft=self.target == "kafka4")
        except LeaderLookupError as error:
            raise NemesisError(str(error)) from error
        return broker_service(self.target, found)

    def broke(
        self, step: ResolvedStep, repair: str, undo: Callable[[], object], **memo: Any
    ) -> None:
        with self._lock:
            self._damage[step.index] = _Damage(repair, undo, memo)

    def memo(self, step: ResolvedStep) -> dict[str, Any]:
        with self._lock:
            damage = self._damage.get(step.index)
        return {} if damage is None else damage.memo

    def repair(self, step: ResolvedStep) -> None:
        with self._lock:
            damage = self._damage.pop(step.index, None)
        if damage is not None:
            damage.undo()

    def proxy(self) -> ProxyControl:
        return self._proxy

    def refbroker(self) -> RefbrokerControl:
        if self._refbroker is None:
            raise NemesisError("the lab has no reference broker")
        return self._refbroker

    def workload(self) -> Workload:
        if self._workload is None:
            raise NemesisError("producer steps need the workload")
        return self._workload

    def consumers(self) -> ConsumerWorkload:
        if self._consumers is None:
            raise NemesisError("consumer steps (and the coordinator) need a consumer workload")
        return self._consumers

    # ---------------------------------------------------------------- heal
    def heal(self) -> list[str]:
        """Undo whatever is still broken, last broken first. Tries everything; returns what
        failed (also logged)."""
        with self._lock:
            outstanding = list(self._damage.values())[::-1]
            self._damage.clear()
        problems = []
        for damage in outstanding:
            try:
                damage.undo()
            except Exception as error:
                problems.append(f"{damage.repair}: {error}")
                self.log("heal", None, "instant", action=damage.repair, error=str(error))
            else:
                self.log("heal", None, "instant", action=damage.repair)
        return problems
