"""Compare one flow's transcripts from Kafka and from the reference broker, answer by answer,
and from Kafka 4 when the lab runs it: a three-way diff.

Every target plays the same program, so their exchanges pair up one to one. For the sequence
flows, the Produce and DescribeProducers exchanges: each answer's error name, each Produce's
base offset relative to the flow's first acknowledged offset (topics differ, and so may their
start), and whether the leader still tracks the producer. For the group flows, every exchange:
its error name and what the runner recorded of the answer (generation, leadership, members,
assignment, offsets, whether the barrier held it). Differences that follow from a documented
difference between Kafka 3.9 and the reference broker's setup are matched against
:data:`KNOWN_DIVERGENCES` and reported with their explanation; they do not fail the diff.

The reference broker follows Kafka 3.9's rules, so it is diffed against Kafka 3.9. Kafka 4 is
diffed against Kafka 3.9 too: where the two Kafkas answer differently, that is a version
difference (:data:`VERSION_DIFFERENCE`), listed apart and never a failure.
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
    """The explanation, when it is a known divergence (or a version difference)."""
    kafka4: object = None
    """What Kafka 4 answered there, when the diff is three-way."""


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

VERSION_DIFFERENCE = (
    "Kafka 4 answers differently from Kafka 3.9: a version difference between the two Kafkas, "
    "not a bug"
)


@dataclass
class FlowDiff:
    flow: str
    kafka: Played
    refbroker: Played
    differences: list[Difference] = field(default_factory=list)
    """The reference broker against Kafka 3.9."""
    kafka4: Played | None = None
    versions: list[Difference] = field(default_factory=list)
    """Kafka 4 against Kafka 3.9 (three-way diffs): version differences, never a failure."""

    @property
    def identical(self) -> bool:
        return not self.differences and not self.versions

    @property
    def unexplained(self) -> list[Difference]:
        return [d for d in self.differences if d.known is None]

    @property
    def conforms(self) -> bool:
        """No difference other than known divergences."""
        return not self.unexplained

    def as_json(self) -> dict[str, Any]:
        transcripts = {"kafka": self.kafka.as_json(), "refbroker": self.refbroker.as_json()}
        if self.kafka4 is not None:
            transcripts["kafka4"] = self.kafka4.as_json()
        return {
            "flow": self.flow,
            "identical": self.identical,
            "conforms": self.conforms,
            "differences": [asdict(d) for d in self.differences],
            "version_differences": [asdict(d) for d in self.versions],
            "transcripts": transcripts,
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


def diff_runs(kafka: FlowRun, refbroker: FlowRun, kafka4: FlowRun | None = None) -> FlowDiff:
    """Every difference between the complete transcripts of one sequence flow."""
    return diff_transcripts(
        kafka,
        refbroker,
        kafka4,
        compared,
        lambda run: partial(observations, origin=first_offset(run)),
    )


def group_observations(exchange: Exchange) -> dict[str, object]:
    return {"error": exchange.error, **exchange.detail}


def diff_group_runs(
    kafka: GroupFlowRun, refbroker: GroupFlowRun, kafka4: GroupFlowRun | None = None
) -> FlowDiff:
    """Every difference between the complete transcripts of one group flow."""
    return diff_transcripts(
        kafka, refbroker, kafka4, lambda run: run.exchanges, lambda _run: group_observations
    )


P = TypeVar("P", bound=Played)


def diff_transcripts(
    kafka: P,
    refbroker: P,
    kafka4: P | None,
    select: Callable[[P], list[Exchange]],
    observer: Callable[[P], Observer],
) -> FlowDiff:
    """Pair the selected exchanges of the transcripts and compare what `observer` sees: the
    reference broker's and Kafka 4's against Kafka 3.9's."""
    runs = [run for run in (kafka, refbroker, kafka4) if run is not None]
    if len({run.flow.name for run in runs}) != 1:
        raise ValueError(f"different flows: {', '.join(run.flow.name for run in runs)}")
    result = FlowDiff(kafka.flow.name, kafka, refbroker, kafka4=kafka4)
    seen = [[observer(run)(exchange) for exchange in select(run)] for run in runs]
    for index, row in enumerate(zip(*seen, strict=True)):
        exchange = select(kafka)[index]
        left, right = row[0], row[1]
        fourth: dict[str, object] = row[2] if kafka4 is not None else {}
        for what, value in left.items():
            difference = Difference(
                index,
                exchange.step,
                exchange.api,
                exchange.tag,
                what,
                value,
                right.get(what),
                kafka4=fourth.get(what),
            )
            if right.get(what) != value:
                result.differences.append(_with_explanation(result.flow, difference))
            if kafka4 is not None and fourth.get(what) != value:
                result.versions.append(replace(difference, known=VERSION_DIFFERENCE))
    return result


def _with_explanation(flow: str, difference: Difference) -> Difference:
    known = next((k for k in KNOWN_DIVERGENCES if k.explains(flow, difference)), None)
    if known is None:
        return difference
    return replace(difference, known=known.explanation)
