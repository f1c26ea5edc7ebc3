"""Compare one flow's transcripts from Kafka and from the reference broker, answer by answer.

Both targets play the same program, so their exchanges pair up one to one. For the sequence
flows, the Produce and DescribeProducers exchanges: each answer's error name, each Produce's
base offset relative to the flow's first acknowledged offset (topics differ, and so may their
start), and whether the leader still tracks the producer. For the group flows, every exchange:
its error name and what the runner recorded of the answer (generation, leadership, members,
assignment, offsets, whether the barrier held it). Differences that follow from a documented
difference between Kafka 3.9 and the reference broker's setup are matched against
:data:`KNOWN_DIVERGENCES` and reported with their explanation; they do not fail the diff.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from typing import Any, Protocol, TypeVar

from eoslab.probe.group_runner import GroupFlowRun
from eoslab.probe.runner import FlowRun
from eoslab.probe.transcript import NONE, Exchange

COMPARED_APIS = ("Produce", "DescribeProducers")


@dataclass(frozen=True)
class KnownDivergence:
    """A difference both targets are right to show: which answer, and why."""

    flow: str
    api: str
    tag: str | None
    what: str
    kafka: object
    refbroker: object
    explanation: str

    def explains(self, flow: str, difference: Difference) -> bool:
        return (self.flow, self.api, self.tag, self.what, self.kafka, self.refbroker) == (
            flow,
            difference.api,
            difference.tag,
            difference.what,
            difference.kafka,
            difference.refbroker,
        )


KIP360_RETENTION = (
    "Kafka 3.9 keeps a producer's state when DeleteRecords moves the log start offset past its "
    "batches (KIP-360 'prolonged producer state retention', KAFKA-7190; it goes only after "
    "producer.id.expiration.ms), while the reference broker's expire-producers removes it at "
    "once, like expiry"
)
KIP360_KAFKA_2_0 = (
    "a reference broker running the kafka-2.0 rules answers UNKNOWN_PRODUCER_ID to a producer "
    "it no longer knows whose sequence is not 0 (seed 002, the error KIP-360 is about); Kafka "
    "3.9 still has the state (see DescribeProducers) and accepts the next sequence"
)

KNOWN_DIVERGENCES: tuple[KnownDivergence, ...] = (
    KnownDivergence("kip-360", "DescribeProducers", None, "tracked", True, False, KIP360_RETENTION),
    KnownDivergence(
        "kip-360", "Produce", "c", "error", NONE, "UNKNOWN_PRODUCER_ID", KIP360_KAFKA_2_0
    ),
    KnownDivergence("kip-360", "Produce", "c", "offset", 2, None, KIP360_KAFKA_2_0),
)
"""Not listed, because no flow restarts a broker: the reference broker's snapshot keeps all 5
cached batches of a producer across a restart, Kafka's keeps only the last one, so after a
restart Kafka refuses a retry of an older cached batch that the reference broker still
answers as a duplicate."""


@dataclass(frozen=True)
class Difference:
    index: int
    """Position among the compared exchanges."""
    step: int
    api: str
    tag: str | None
    what: str
    """``error``, ``offset`` (relative to the flow's first) or ``tracked``."""
    kafka: object
    refbroker: object
    known: str | None = None
    """The explanation, when it is a known divergence."""


class Named(Protocol):
    @property
    def name(self) -> str: ...


class Played(Protocol):
    """A flow played on one target: a FlowRun or a GroupFlowRun."""

    @property
    def flow(self) -> Named: ...

    @property
    def exchanges(self) -> list[Exchange]: ...

    def as_json(self) -> dict[str, Any]: ...


Observer = Callable[[Exchange], dict[str, object]]


@dataclass
class FlowDiff:
    flow: str
    kafka: Played
    refbroker: Played
    differences: list[Difference] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not self.differences

    @property
    def unexplained(self) -> list[Difference]:
        return [d for d in self.differences if d.known is None]

    @property
    def conforms(self) -> bool:
        """No difference other than known divergences."""
        return not self.unexplained

    def as_json(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "identical": self.identical,
            "conforms": self.conforms,
            "differences": [asdict(d) for d in self.differences],
            "transcripts": {"kafka": self.kafka.as_json(), "refbroker": self.refbroker.as_json()},
        }


def compared(run: FlowRun) -> list[Exchange]:
    return [e for e in run.exchanges if e.api in COMPARED_APIS]


def first_offset(run: FlowRun) -> int | None:
    """The flow's first acknowledged base offset: the origin of its relative offsets."""
    return next(
        (e.base_offset for e in run.produced() if e.error == NONE and e.base_offset is not None),
        None,
    )


def observations(exchange: Exchange, origin: int | None) -> dict[str, object]:
    """What is compared of one exchange."""
    if exchange.api == "DescribeProducers":
        return {"error": exchange.error, "tracked": exchange.detail.get("tracked")}
    offset = None
    if exchange.error == NONE and exchange.base_offset is not None and origin is not None:
        offset = exchange.base_offset - origin
    return {"error": exchange.error, "offset": offset}


def diff_runs(kafka: FlowRun, refbroker: FlowRun) -> FlowDiff:
    """Every difference between the two complete transcripts of one sequence flow."""
    return diff_transcripts(
        kafka, refbroker, compared, lambda run: partial(observations, origin=first_offset(run))
    )


def group_observations(exchange: Exchange) -> dict[str, object]:
    return {"error": exchange.error, **exchange.detail}


def diff_group_runs(kafka: GroupFlowRun, refbroker: GroupFlowRun) -> FlowDiff:
    """Every difference between the two complete transcripts of one group flow."""
    return diff_transcripts(
        kafka, refbroker, lambda run: run.exchanges, lambda _run: group_observations
    )


P = TypeVar("P", bound=Played)


def diff_transcripts(
    kafka: P,
    refbroker: P,
    select: Callable[[P], list[Exchange]],
    observer: Callable[[P], Observer],
) -> FlowDiff:
    """Pair the selected exchanges of both transcripts and compare what `observer` sees."""
    if kafka.flow.name != refbroker.flow.name:
        raise ValueError(f"different flows: {kafka.flow.name} and {refbroker.flow.name}")
    result = FlowDiff(kafka.flow.name, kafka, refbroker)
    observe_left, observe_right = observer(kafka), observer(refbroker)
    pairs = zip(select(kafka), select(refbroker), strict=True)
    for index, (left, right) in enumerate(pairs):
        seen_right = observe_right(right)
        for what, value in observe_left(left).items():
            if seen_right.get(what) != value:
                difference = Difference(
                    index, left.step, left.api, left.tag, what, value, seen_right.get(what)
                )
                result.differences.append(_with_explanation(result.flow, difference))
    return result


def _with_explanation(flow: str, difference: Difference) -> Difference:
    known = next((k for k in KNOWN_DIVERGENCES if k.explains(flow, difference)), None)
    if known is None:
        return difference
    return replace(difference, known=known.explanation)
