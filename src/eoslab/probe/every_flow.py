"""Every probe flow, diffed on the lab's targets at once: what the nightly DAG runs beside the
matrix and the nightly report shows per flow (``probe-diffs.json`` in the night's run folder).

One :class:`FlowSummary` per flow: did the reference broker answer as Kafka 3.9 did (known
divergences allowed), how many differences of each kind, each unexplained one on a line, and
Kafka 4's version differences when the lab runs it. A flow that could not be played (no leader,
a broken connection) is a summary with its ``error``, never a missing row.
"""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import KafkaException
from pydantic import BaseModel, ConfigDict, TypeAdapter

from eoslab.admin import LeaderLookupError
from eoslab.probe.diff import Difference, FlowDiff
from eoslab.probe.flows import FLOWS, Flow
from eoslab.probe.group_flows import GROUP_FLOWS, GroupFlow
from eoslab.probe.runner import ProbeError
from eoslab.probe.targets import diff_on_lab
from eoslab.probe.txn_flows import TXN_FLOWS, TxnFlow
from eoslab.probe.txn_runner import diff_txn_on_lab
from eoslab.runtime.topology import LabConfig

ALL_FLOWS: dict[str, Flow | GroupFlow | TxnFlow] = {**FLOWS, **GROUP_FLOWS, **TXN_FLOWS}
PROBE_FAILURES = (ProbeError, LeaderLookupError, KafkaException, OSError, TimeoutError)
"""What a flow run on the lab can fail with: no leader, a refused InitProducerId, the control
API, topic creation, a broken connection."""
PROBE_DIFFS_FILE = "probe-diffs.json"


def diff_flow_on_lab(flow: Flow | GroupFlow | TxnFlow, config: LabConfig) -> FlowDiff:
    """Play ``flow`` on Kafka 3.9, the reference broker and (when the lab runs it) Kafka 4."""
    if isinstance(flow, TxnFlow):
        return diff_txn_on_lab(flow, config)
    return diff_on_lab(flow, config)


class FlowSummary(BaseModel):
    """One flow's diff, as the nightly report shows it."""

    model_config = ConfigDict(extra="forbid")

    flow: str
    seed: str
    three_way: bool = False
    """Kafka 4 was among the targets."""
    conforms: bool
    """The reference broker answered as Kafka 3.9, known divergences aside."""
    differences: int = 0
    known: int = 0
    version_differences: int = 0
    unexplained: list[str] = []
    """Each difference of the reference broker's that no known divergence explains."""
    error: str | None = None
    """Why the flow could not be played (then it does not conform)."""


def describe(difference: Difference) -> str:
    return (
        f"step {difference.step} {difference.api} {difference.what}: "
        f"kafka {difference.kafka!r}, refbroker {difference.refbroker!r}"
    )


def summarise(flow: Flow | GroupFlow | TxnFlow, result: FlowDiff) -> FlowSummary:
    return FlowSummary(
        flow=flow.name,
        seed=flow.seed,
        three_way=result.kafka4 is not None,
        conforms=result.conforms,
        differences=len(result.differences),
        known=len(result.differences) - len(result.unexplained),
        version_differences=len(result.versions),
        unexplained=[describe(d) for d in result.unexplained],
    )


def diff_every_flow(config: LabConfig, names: list[str] | None = None) -> list[FlowSummary]:
    """Every flow of :data:`ALL_FLOWS` (or those ``names``), one after the other, on the lab of
    ``config``; ValueError naming an unknown flow."""
    unknown = sorted(set(names or ()) - ALL_FLOWS.keys())
    if unknown:
        raise ValueError(f"unknown probe flow(s) {unknown}; choose among {', '.join(ALL_FLOWS)}")
    summaries = []
    for flow in (ALL_FLOWS[name] for name in names or ALL_FLOWS):
        try:
            summaries.append(summarise(flow, diff_flow_on_lab(flow, config)))
        except PROBE_FAILURES as error:
            summaries.append(
                FlowSummary(flow=flow.name, seed=flow.seed, conforms=False, error=str(error))
            )
    return summaries


SUMMARIES = TypeAdapter(list[FlowSummary])


def write_summaries(path: Path, summaries: list[FlowSummary]) -> None:
    path.write_bytes(SUMMARIES.dump_json(summaries, indent=2) + b"\n")


def read_summaries(path: Path) -> list[FlowSummary]:
    """The summaries in ``path`` ([] when there is none: a night without probe diffs)."""
    if not path.is_file():
        return []
    return SUMMARIES.validate_json(path.read_bytes())
