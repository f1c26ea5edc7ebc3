"""The nemesis: plays timeline steps on the lab, logs each to faults.jsonl, judges whether each
took effect, and heals.

Process faults go through the lab runtime (kill -9, SIGSTOP/SIGCONT, restart), network faults
through the chaos proxy's control API (between clients and brokers) or the runtime's network
(partitions between the lab's nodes: :mod:`eoslab.runtime.netfaults`), state faults through the reference broker's, producer
and consumer faults through the workloads. Each step says how to undo what it broke
(:meth:`Nemesis.broke`); its end undoes it, and :meth:`Nemesis.heal` ends whatever is still
broken, last broken first, even when the run fails halfway.

Every step also says what it saw (:meth:`Nemesis.judge`): the pid it killed and that the
process died, the frames the proxy dropped, the fault the reference broker consumed. When the
run is over, :meth:`Nemesis.effects` turns that into one :class:`FaultEffect` per step of the
timeline: a step that was skipped, failed, or did nothing observable did **not** take effect,
and the run's verdict is then invalid.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from eoslab.admin import (
    LeaderLookupError,
    active_controller,
    find_leader,
    group_coordinator,
    leader_of,
)
from eoslab.clock import now_ms
from eoslab.fault_events import FaultEffect, FaultEvent, FaultPhase, append_event
from eoslab.nemesis.steps.base import (
    CONTROLLER,
    COORDINATOR,
    FOLLOWERS,
    LEADER,
    TXN_COORDINATOR,
    ResolvedStep,
)
from eoslab.probe.runner import ProbeError
from eoslab.probe.txn_runner import transaction_coordinator_id
from eoslab.proxy.control_client import ProxyControl
from eoslab.proxy.fronting import broker_route
from eoslab.refbroker.control_client import RefbrokerControl
from eoslab.run_context import RunContext
from eoslab.runtime.lab import ProcessFaults
from eoslab.runtime.netfaults import LabNetwork, Partitionable
from eoslab.runtime.topology import REFBROKER_SERVICE, broker_service
from eoslab.workload.consumer.workload import ConsumerWorkload
from eoslab.workload.supervisor import Workload


class NemesisError(RuntimeError):
    """A step could not be played (the message says which and why)."""


@dataclass
class _Damage:
    step: ResolvedStep
    repair: str
    undo: Callable[[], object]
    memo: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Record:
    """What became of one step: when it ran, what it saw, and the judgement."""

    started_ms: int | None = None
    ended_ms: int | None = None
    took_effect: bool | None = None
    evidence: str = ""
    observed: dict[str, Any] = field(default_factory=dict)
    failure: str | None = None
    skipped: str | None = None


class Nemesis:
    def __init__(
        self,
        context: RunContext,
        *,
        runtime: ProcessFaults,
        proxy: ProxyControl,
        refbroker: RefbrokerControl | None,
        workload: Workload | None = None,
        consumers: ConsumerWorkload | None = None,
    ) -> None:
        self.context = context
        self.runtime = runtime
        self._proxy = proxy
        self._refbroker = refbroker
        self._workload = workload
        self._consumers = consumers
        self._lock = threading.Lock()
        self._services: dict[int, str] = {}
        self._damage: dict[int, _Damage] = {}
        self._records: dict[int, _Record] = {}
        self._claims: dict[str, int] = {}
        """An observation -> the step whose evidence it is (:meth:`claim`)."""
        self._healing = False
        self.errors: list[str] = []
        """Steps that failed (also in faults.jsonl); the run goes on and reports them."""

    # ---------------------------------------------------------------- StepExecutor
    def start(self, step: ResolvedStep) -> None:
        self._record(step).started_ms = now_ms()
        try:
            step.step.start(self, step)
        except Exception as error:
            self._failed(step, "start", error)

    def end(self, step: ResolvedStep) -> None:
        record = self._record(step)
        with self._lock:
            broken = step.index in self._damage
        try:
            if broken or record.failure is None:  # a failed start that broke nothing: no end
                step.step.end(self, step)
        except Exception as error:
            self._failed(step, "end", error)
        finally:
            record.ended_ms = now_ms()

    def skip(self, step: ResolvedStep, reason: str) -> None:
        self._record(step).skipped = reason
        self.log(step, FaultPhase.SKIPPED, reason=reason)

    def _failed(self, step: ResolvedStep, when: str, error: Exception) -> None:
        message = f"step {step.index} ({step.kind}) {when}: {error}"
        self.errors.append(message)
        record = self._record(step)
        record.failure = record.failure or f"{when} failed: {error}"
        self.log(step, FaultPhase.FAILED, error=str(error), at=when)

    def _record(self, step: ResolvedStep) -> _Record:
        with self._lock:
            return self._records.setdefault(step.index, _Record())

    # ---------------------------------------------------------------- StepContext
    def log(
        self,
        step: ResolvedStep,
        phase: FaultPhase | str,
        *,
        kind: str | None = None,
        target: str | None = None,
        **detail: Any,
    ) -> None:
        """One line of faults.jsonl for ``step``: its kind and resolved target unless told."""
        if self._healing and phase == FaultPhase.END:
            detail["healed"] = True
        event = FaultEvent(
            ts_ms=now_ms(),
            step=step.index,
            kind=kind or step.kind,
            target=target if target is not None else self._known_service(step),
            phase=FaultPhase(phase),
            detail=detail,
        )
        append_event(self.context.run_dir.faults_jsonl, event)

    def judge(self, step: ResolvedStep, took_effect: bool, evidence: str, **observed: Any) -> None:
        """What the step saw, and whether that shows it took effect; a later judgement of the
        same step (at its end) replaces the verdict and adds to what was observed."""
        record = self._record(step)
        record.took_effect = took_effect
        record.evidence = evidence
        record.observed.update(observed)

    def observe(self, step: ResolvedStep, **observed: Any) -> None:
        self._record(step).observed.update(observed)

    def claim(self, step: ResolvedStep, evidence: str) -> int | None:
        with self._lock:
            owner = self._claims.setdefault(evidence, step.index)
        return None if owner == step.index else owner

    def service(self, step: ResolvedStep) -> str:
        """The step's service; "leader", "coordinator" and "controller" are looked up once, at its
        start."""
        known = self._known_service(step)
        if known is not None and known not in (
            LEADER,
            COORDINATOR,
            TXN_COORDINATOR,
            CONTROLLER,
            FOLLOWERS,
        ):
            return self._named(known)
        if step.target is None:
            raise NemesisError(f"step {step.index} ({step.kind}) has no target")
        (service,) = self.resolve_target(step.target, getattr(step.step, "partition", 0))
        with self._lock:
            self._services[step.index] = service
        return service

    def services(self, step: ResolvedStep) -> list[str]:
        """The step's service, or for ``followers`` every other replica of its partition
        (looked up once, at its start)."""
        if step.target != FOLLOWERS:
            return [self.service(step)]
        with self._lock:
            known = self._services.get(step.index)
        if known is None:
            known = ",".join(self.resolve_target(FOLLOWERS, getattr(step.step, "partition", 0)))
            with self._lock:
                self._services[step.index] = known
        return known.split(",") if known else []

    def resolve_target(self, name: str, partition: int = 0) -> list[str]:
        """The services a target names now: the leader of ``partition`` of the run's topic, its
        followers, the group's or the transactions' coordinator, the active controller, or a
        service named as itself."""
        if name == LEADER:
            return [self.leader_of(partition)]
        if name == COORDINATOR:
            return [self.coordinator()]
        if name == TXN_COORDINATOR:
            return [self.txn_coordinator()]
        if name == CONTROLLER:
            return [self.controller()]
        if name != FOLLOWERS:
            return [self._named(name)]
        if self.context.lab_target == "refbroker":
            raise NemesisError("the reference broker is one node: a partition has no followers")
        try:
            found = find_leader(self.context.bootstrap, self.context.topic, partition)
        except LeaderLookupError as error:
            raise NemesisError(str(error)) from error
        return [self._broker(f) for f in found.followers]

    def _broker(self, broker_id: int) -> str:
        """The service of the broker with this id; on an external cluster, the fronting
        proxy's route to it (a proxy fault is all a step can do there)."""
        if self.context.target == "external":
            return broker_route(broker_id)
        return broker_service(self.context.lab_target, broker_id)

    def _named(self, service: str) -> str:
        """A service a step names as itself; on an external cluster a broker's (``kafka-2``)
        is the fronting proxy's route to the broker with that id."""
        if self.context.target != "external":
            return service
        prefix, _, broker_id = service.rpartition("-")
        if prefix in ("kafka", "kafka4") and broker_id.isdigit():
            return broker_route(int(broker_id))
        return service

    def _known_service(self, step: ResolvedStep) -> str | None:
        with self._lock:
            return self._services.get(step.index, step.target)

    def leader_of(self, partition: int) -> str:
        """The service leading ``partition`` of the run's topic now."""
        if self.context.lab_target == "refbroker":
            return REFBROKER_SERVICE
        try:
            found = leader_of(self.context.bootstrap, self.context.topic, partition)
            return self._broker(found)
        except LeaderLookupError as error:
            raise NemesisError(str(error)) from error

    def coordinator(self) -> str:
        """The service coordinating the run's consumer group now."""
        if self.context.lab_target == "refbroker":
            return REFBROKER_SERVICE
        try:
            group = self.consumers().group
            return self._broker(group_coordinator(self.context.bootstrap, group))
        except LeaderLookupError as error:
            raise NemesisError(str(error)) from error

    def txn_coordinator(self) -> str:
        """The service coordinating producer 0's transactional id now (FindCoordinator with key
        type 1, the transaction coordinator)."""
        if self.context.lab_target == "refbroker":
            return REFBROKER_SERVICE
        ids = self.workload().transactional_ids
        if not ids:
            raise NemesisError("the txn-coordinator target needs transactional producers")
        try:
            found = transaction_coordinator_id(self.context.bootstrap, ids[0])
        except ProbeError as error:
            raise NemesisError(str(error)) from error
        return self._broker(found)

    def controller(self) -> str:
        """The service that is the target's active controller now."""
        if self.context.lab_target == "refbroker":
            return REFBROKER_SERVICE
        try:
            found = active_controller(
                self.context.bootstrap, kraft=self.context.lab_target == "kafka4"
            )
        except LeaderLookupError as error:
            raise NemesisError(str(error)) from error
        return self._broker(found)

    def broke(
        self, step: ResolvedStep, repair: str, undo: Callable[[], object], **memo: Any
    ) -> None:
        with self._lock:
            self._damage[step.index] = _Damage(step, repair, undo, memo)

    def memo(self, step: ResolvedStep) -> dict[str, Any]:
        with self._lock:
            damage = self._damage.get(step.index)
        return {} if damage is None else damage.memo

    def repair(self, step: ResolvedStep) -> None:
        with self._lock:
            damage = self._damage.pop(step.index, None)
        if damage is not None:
            damage.undo()

    def end_faults(self, kinds: Collection[str]) -> list[ResolvedStep]:
        """End every step of these kinds whose fault is still in place, as its own end would
        (so its evidence is read), last broken first; the steps ended."""
        with self._lock:
            outstanding = [d.step for d in self._damage.values() if d.step.kind in kinds][::-1]
        for step in outstanding:
            self.end(step)
        return outstanding

    def network(self) -> LabNetwork:
        """The lab's network, for cutting links between its nodes; refused with the reason when
        the runtime or the machine cannot (another runtime, no root)."""
        if not isinstance(self.runtime, Partitionable):
            raise NemesisError(
                f"network partitions need the local runtime; the {type(self.runtime).__name__} "
                "cannot cut links between the lab's nodes"
            )
        network = self.runtime.network()
        why = network.unavailable()
        if why is not None:
            raise NemesisError(why)
        return network

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
    def heal(self) -> None:
        """End every step whose fault is still in place, last broken first, as its own end
        would (so its evidence is read too); when an end fails, what it broke is undone bare.
        Tries everything; what failed goes to :attr:`errors` (and faults.jsonl)."""
        with self._lock:
            outstanding = list(self._damage.values())[::-1]
        self._healing = True
        try:
            for damage in outstanding:
                self.end(damage.step)
                self._undo_bare(damage)
        finally:
            self._healing = False

    def _undo_bare(self, damage: _Damage) -> None:
        """Undo what a step broke if its end left it broken (the end failed before repairing)."""
        with self._lock:
            left = self._damage.pop(damage.step.index, None)
        if left is None:
            return
        try:
            left.undo()
        except Exception as error:
            self._failed(left.step, f"heal ({left.repair})", error)

    # ---------------------------------------------------------------- evidence
    def effects(self, steps: Iterable[ResolvedStep]) -> list[FaultEffect]:
        """One judgement per step of the timeline (call once the run is over)."""
        return [self._effect(step) for step in steps]

    def _effect(self, step: ResolvedStep) -> FaultEffect:
        with self._lock:
            record = self._records.get(step.index, _Record())
        took_effect, evidence = bool(record.took_effect), record.evidence
        if record.skipped is not None:
            took_effect, evidence = False, f"skipped: {record.skipped}"
        elif record.started_ms is None:
            took_effect, evidence = False, "never started: the run ended before its trigger"
        elif record.failure is not None and not record.took_effect:
            took_effect, evidence = False, record.failure
        elif record.took_effect is None:
            took_effect, evidence = False, "the step recorded no evidence of its effect"
        return FaultEffect(
            step=step.index,
            kind=step.kind,
            target=self._known_service(step),
            took_effect=took_effect,
            evidence=evidence,
            observed=record.observed,
            started_ms=record.started_ms,
            ended_ms=record.ended_ms,
        )
