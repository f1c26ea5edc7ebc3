"""The nemesis: plays timeline steps on the lab, logs each to faults.jsonl, and heals.

Process faults go through the lab runtime's Python API (kill -9, SIGSTOP/SIGCONT,
restart), network faults through the chaos proxy's control API, state faults through the
reference broker's control API, producer crashes through the workload. Whatever a step
broke is remembered, so :meth:`Nemesis.heal` can undo it even when the run fails halfway.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

from confluent_kafka.admin import AdminClient

from eoslab.chaos.control_client import ProxyControl
from eoslab.chaos.timeline import (
    KillStep,
    PauseStep,
    ProbeStep,
    ProducerCrashStep,
    ProxyStep,
    RefbrokerStep,
    ResolvedStep,
    RestartStep,
    RollingRestartStep,
    RunTarget,
    brokers_of,
)
from eoslab.probe import scenarios as probes
from eoslab.refbroker.control_client import RefbrokerControl
from eoslab.rundir import RunDir, now_ms
from eoslab.workload.supervisor import Workload

LEADER_LOOKUP_TIMEOUT_S = 15.0
REFBROKER_DEFAULT_RETAINED_BATCHES = 5


class LabRuntime(Protocol):
    """The verbs of `eoslab.runtime.get_runtime(...)` the nemesis uses."""

    def kill(self, name: str) -> None: ...
    def pause(self, name: str) -> None: ...
    def resume(self, name: str) -> None: ...
    def restart(self, name: str) -> None: ...


class NemesisError(RuntimeError):
    """A step could not be played (the message says which and why)."""


class Nemesis:
    def __init__(
        self,
        *,
        run_dir: RunDir,
        target: RunTarget,
        runtime: LabRuntime,
        bootstrap: str,
        topic: str,
        proxy: ProxyControl,
        refbroker: RefbrokerControl | None,
        workload: Workload | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.target = target
        self.runtime = runtime
        self.bootstrap = bootstrap
        self.topic = topic
        self.proxy = proxy
        self.refbroker = refbroker
        self.workload = workload
        self._lock = threading.Lock()
        self._killed: set[str] = set()
        self._paused: set[str] = set()
        self._proxy_faults: dict[int, str] = {}
        self._step_targets: dict[int, str] = {}
        self._refbroker_touched = False
        self._proxy_touched = False
        self._retained_changed = False
        self.errors: list[str] = []
        """Steps that failed (also in faults.jsonl); the run goes on and reports them."""

    # ---------------------------------------------------------------- the fault log
    def log(self, kind: str, target: str | None, phase: str, **detail: Any) -> None:
        self.run_dir.append_jsonl(
            self.run_dir.faults_jsonl,
            {"ts_ms": now_ms(), "kind": kind, "target": target, "phase": phase, "detail": detail},
        )

    # ---------------------------------------------------------------- StepExecutor
    def start(self, step: ResolvedStep) -> None:
        try:
            self._start(step)
        except Exception as error:
            self.errors.append(f"step {step.index} ({step.kind}) start: {error}")
            self.log(step.kind, step.target, "instant", step=step.index, error=str(error))

    def end(self, step: ResolvedStep) -> None:
        try:
            self._end(step)
        except Exception as error:
            self.errors.append(f"step {step.index} ({step.kind}) end: {error}")
            self.log(step.kind, step.target, "end", step=step.index, error=str(error))

    def skip(self, step: ResolvedStep, reason: str) -> None:
        self.log(step.kind, step.target, "instant", step=step.index, skipped=reason)

    def _start(self, resolved: ResolvedStep) -> None:
        step, index = resolved.step, resolved.index
        ends = resolved.duration_s is not None
        phase = "start" if ends else "instant"
        match step:
            case KillStep():
                service = self._service(resolved)
                self.runtime.kill(service)
                with self._lock:
                    self._killed.add(service)
                self.log("kill", service, phase, step=index, signal="SIGKILL")
            case PauseStep():
                service = self._service(resolved)
                self.runtime.pause(service)
                with self._lock:
                    self._paused.add(service)
                self.log("pause", service, "start", step=index, signal="SIGSTOP")
            case RestartStep():
                service = self._service(resolved)
                self.log("restart", service, "start", step=index)
                self.runtime.restart(service)
                self.log("restart", service, "end", step=index)
            case RollingRestartStep(interval=interval):
                for service in brokers_of(self.target):
                    self.log("restart", service, "start", step=index, rolling=True)
                    self.runtime.restart(service)
                    self.log("restart", service, "end", step=index, rolling=True)
                    time.sleep(interval)
            case ProxyStep():
                route = "*" if resolved.target == "*" else self._service(resolved)
                spec = step.spec(route)
                fault_id = self.proxy.add(spec)
                with self._lock:
                    self._proxy_faults[index] = fault_id
                    self._proxy_touched = True
                detail = spec.model_dump(mode="json", exclude_none=True)
                self.log(f"proxy:{spec.kind}", route, phase, step=index, id=fault_id, spec=detail)
            case RefbrokerStep():
                answer = self._refbroker().apply(step.fault)
                with self._lock:
                    self._refbroker_touched = True
                    self._retained_changed |= step.fault.get("kind") == "retained-batches"
                self.log(
                    f"refbroker:{step.fault['kind']}",
                    "refbroker",
                    phase,
                    step=index,
                    applied=answer,
                )
            case ProducerCrashStep(producer=producer):
                crashed = self._workload().crash(producer)
                self.log(
                    "producer-crash",
                    f"producer-{producer}",
                    phase,
                    step=index,
                    session_id=crashed.session_id,
                )
                if not ends:
                    self._restart_producer(producer, index, "instant")
            case ProbeStep(probe=probe, partition=partition):
                self.log("probe", f"partition-{partition}", "start", step=index, probe=probe)
                outcome = run_probe(
                    probe,
                    bootstrap=self.bootstrap,
                    topic=self.topic,
                    partition=partition,
                    run_dir=self.run_dir,
                    run_id=self.run_dir.run_id,
                )
                self.log(
                    "probe",
                    f"partition-{partition}",
                    "end",
                    step=index,
                    probe=probe,
                    outcome=outcome,
                )

    def _end(self, resolved: ResolvedStep) -> None:
        step, index = resolved.step, resolved.index
        match step:
            case KillStep():
                service = self._step_targets[index]
                self.runtime.restart(service)
                with self._lock:
                    self._killed.discard(service)
                self.log("kill", service, "end", step=index, restarted=True)
            case PauseStep():
                service = self._step_targets[index]
                self.runtime.resume(service)
                with self._lock:
                    self._paused.discard(service)
                self.log("pause", service, "end", step=index, signal="SIGCONT")
            case ProxyStep():
                with self._lock:
                    fault_id = self._proxy_faults.pop(index)
                counts = {f["id"]: f for f in self.proxy.faults()}.get(fault_id, {})
                self.proxy.remove(fault_id)
                self.log(
                    f"proxy:{step.fault['kind']}",
                    self._step_targets.get(index, "*"),
                    "end",
                    step=index,
                    id=fault_id,
                    matched=counts.get("matched"),
                    injected=counts.get("injected"),
                )
            case RefbrokerStep():
                self._refbroker().clear()
                self.log(f"refbroker:{step.fault['kind']}", "refbroker", "end", step=index)
            case ProducerCrashStep(producer=producer):
                self._restart_producer(producer, index, "end")

    # ---------------------------------------------------------------- heal
    def heal(self) -> list[str]:
        """Undo whatever is still broken: resume, clear proxy and refbroker faults, restart
        killed brokers. Tries everything; returns what failed."""
        problems = []
        with self._lock:
            paused, killed = sorted(self._paused), sorted(self._killed)
        actions: list[tuple[str, Any]] = [
            (f"resume {s}", lambda s=s: self.runtime.resume(s)) for s in paused
        ]
        if self._proxy_touched:
            actions.append(("clear proxy faults", self.proxy.clear))
        if self.refbroker is not None and self._refbroker_touched:
            actions.append(("clear refbroker faults", self.refbroker.clear))
            if self._retained_changed:
                retained = {"kind": "retained-batches", "count": REFBROKER_DEFAULT_RETAINED_BATCHES}
                actions.append(
                    ("reset refbroker retained batches", lambda: self._refbroker().apply(retained))
                )
        actions += [(f"restart {s}", lambda s=s: self.runtime.restart(s)) for s in killed]
        for what, action in actions:
            try:
                action()
            except Exception as error:
                problems.append(f"{what}: {error}")
                self.log("heal", None, "instant", action=what, error=str(error))
            else:
                self.log("heal", None, "instant", action=what)
        with self._lock:
            self._paused.clear()
            self._killed.clear()
            self._proxy_faults.clear()
        return problems

    # ---------------------------------------------------------------- helpers
    def _service(self, resolved: ResolvedStep) -> str:
        service = resolved.target
        if service == "leader":
            service = self.leader_of(getattr(resolved.step, "partition", 0))
        if service is None:
            raise NemesisError(f"step {resolved.index} ({resolved.kind}) has no target")
        self._step_targets[resolved.index] = service
        return service

    def leader_of(self, partition: int) -> str:
        """The service leading ``partition`` of the run's topic now (from metadata)."""
        if self.target == "refbroker":
            return "refbroker"
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        deadline = time.monotonic() + LEADER_LOOKUP_TIMEOUT_S
        while time.monotonic() < deadline:
            topic = admin.list_topics(self.topic, timeout=5).topics.get(self.topic)
            if topic is not None and partition in topic.partitions:
                leader = topic.partitions[partition].leader
                if leader >= 0:
                    return f"kafka-{leader}"
            time.sleep(0.2)
        raise NemesisError(
            f"no leader for {self.topic}[{partition}] after {LEADER_LOOKUP_TIMEOUT_S} s"
        )

    def _restart_producer(self, producer: int, index: int, phase: str) -> None:
        session = self._workload().restart(producer)
        self.log(
            "producer-crash",
            f"producer-{producer}",
            phase,
            step=index,
            restarted=session.session_id,
        )

    def _workload(self) -> Workload:
        if self.workload is None:
            raise NemesisError("producer steps need the workload")
        return self.workload

    def _refbroker(self) -> RefbrokerControl:
        if self.refbroker is None:
            raise NemesisError("the lab has no reference broker")
        return self.refbroker


PROBES = {"inflight-6": probes.inflight_6, "seq-jump": probes.seq_jump}
"""The scenario files' probe names (timeline.ProbeName) -> eoslab.probe.scenarios."""


def run_probe(
    probe: str, *, bootstrap: str, topic: str, partition: int, run_dir: RunDir, run_id: str
) -> dict[str, Any]:
    """Run a protocol-level probe; it writes its own session's history rows into ``run_dir``."""
    function = PROBES.get(probe)
    if function is None:
        raise NemesisError(f"unknown probe {probe!r}; known: {', '.join(PROBES)}")
    return function(
        bootstrap=bootstrap, topic=topic, partition=partition, run_dir=run_dir, run_id=run_id
    )
