"""The probes a scenario's nemesis plays (``kind: probe``), named as in the scenario files.

Each plays one seed flow on the run's topic and partition, next to the workload, as a
producer session of its own, and writes that session's history rows into the run directory
(:mod:`eoslab.probe.history`), so that the checker sees the probe's records like the
workload's: fig. 5's duplicate is a ``duplicate`` in the probe's session, and the refused
batches put OUT_OF_ORDER_SEQUENCE_NUMBER in the history's ``error`` column.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from eoslab.probe.flows import FIG5, SEQ_JUMP, Flow
from eoslab.probe.history import write_history
from eoslab.probe.runner import ProbeTarget, new_flow_run, play
from eoslab.rundir import RunDir


def inflight_6(
    *, bootstrap: str, topic: str, partition: int, run_dir: RunDir, run_id: str
) -> dict[str, Any]:
    """003 fig. 5: six in flight, the first ack lost, its retry refused, the epoch bumped."""
    return run_scenario_flow(
        FIG5, bootstrap=bootstrap, topic=topic, partition=partition, run_dir=run_dir, run_id=run_id
    )


def seq_jump(
    *, bootstrap: str, topic: str, partition: int, run_dir: RunDir, run_id: str
) -> dict[str, Any]:
    """000 demo: sequence 111 after 1 is refused with OUT_OF_ORDER_SEQUENCE_NUMBER."""
    return run_scenario_flow(
        SEQ_JUMP,
        bootstrap=bootstrap,
        topic=topic,
        partition=partition,
        run_dir=run_dir,
        run_id=run_id,
    )


def run_scenario_flow(
    flow: Flow, *, bootstrap: str, topic: str, partition: int, run_dir: RunDir, run_id: str
) -> dict[str, Any]:
    """Play ``flow`` and write its history rows, even when the flow breaks off halfway (what
    was sent must not turn up in the log as a phantom). Returns the fault log's summary."""
    target = ProbeTarget("scenario", bootstrap)
    run = new_flow_run(flow, target, topic, partition, run_id=run_id)
    try:
        play(run, target)
    finally:
        rows = write_history(run, run_dir)
    return {
        "flow": flow.name,
        "session_id": run.session_id,
        "producer": run.producer,
        "producer_id": run.producer_id,
        "leader": run.leader,
        "history_rows": rows,
        "answers": [
            {"tag": e.tag, "epoch": e.epoch, "base_sequence": e.base_sequence, "error": e.error}
            for e in run.produced()
        ],
    }


@dataclass(frozen=True)
class Provokes:
    """The answer a scenario probe's flow exists to provoke: the broker answered batch ``tag``
    with ``error`` (the probe step took effect only then; any other answer, or none, is a
    broker that was never put to the test)."""

    tag: str
    error: str
    what: str
    """The answer in words, for the step's evidence."""

    def met(self, answers: list[dict[str, Any]]) -> bool:
        return any(a.get("tag") == self.tag and a.get("error") == self.error for a in answers)


ProbeName = Literal["inflight-6", "seq-jump"]
SCENARIO_PROBES: dict[str, Callable[..., dict[str, Any]]] = {
    "inflight-6": inflight_6,
    "seq-jump": seq_jump,
}
"""The scenario files' probe names -> the probe that plays it."""
PROVOKES: dict[str, Provokes] = {
    "inflight-6": Provokes(
        "A",
        "OUT_OF_ORDER_SEQUENCE_NUMBER",
        "the retry of A (the sixth batch back) refused with OUT_OF_ORDER_SEQUENCE_NUMBER",
    ),
    "seq-jump": Provokes(
        "jump",
        "OUT_OF_ORDER_SEQUENCE_NUMBER",
        "sequence 111 refused with OUT_OF_ORDER_SEQUENCE_NUMBER",
    ),
}
"""What each probe exists to provoke (:class:`Provokes`)."""
