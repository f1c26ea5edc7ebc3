"""The seeds' sequence flows as probe programs: data that runs the same against any target.

A flow names its record groups (the seeds' ``A/120~114``: a tag, the producer sequence of its
first record in the first epoch, a record count) and a list of steps. The runner
(:mod:`eoslab.probe.runner`) plays the steps on one connection to the partition leader:

- :class:`Send` pipelines one Produce request (acks=-1) with one group's records, at the
  producer's epoch plus ``epoch_bump`` and from ``sequence`` (default: the group's own);
- :class:`Receive` reads the next responses in order; ``lost=True`` reads them and then
  ignores them, as if the acks had never arrived (the lost ack of fig. 3 and fig. 5);
- :class:`Reconnect` gives the connection up and opens a new one (a producer that timed out);
- :class:`RemoveProducerState` removes the producer's state by the target's own means
  (DeleteRecords on Kafka, the control API's ``expire-producers`` on the reference broker);
- :class:`DescribeProducers` asks the leader which producers it still tracks.

A record keeps its identity (its v1 message: tag, message sequence) across resends, so a
duplicate in the log is the same message twice.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Records:
    """One group of records: ``tag/first_sequence ~ first_sequence+count-1`` in the seeds."""

    tag: str
    first_sequence: int
    count: int


@dataclass(frozen=True)
class Send:
    tag: str
    epoch_bump: int = 0
    sequence: int | None = None
    """The batch's base sequence; None: the group's own first sequence."""


@dataclass(frozen=True)
class Receive:
    count: int = 1
    lost: bool = False


@dataclass(frozen=True)
class Reconnect:
    pass


@dataclass(frozen=True)
class RemoveProducerState:
    pass


@dataclass(frozen=True)
class DescribeProducers:
    pass


Step = Send | Receive | Reconnect | RemoveProducerState | DescribeProducers


@dataclass(frozen=True)
class Flow:
    name: str
    seed: str
    """Where the flow comes from (seed article and figure)."""
    description: str
    records: tuple[Records, ...]
    steps: tuple[Step, ...]

    def group(self, tag: str) -> Records:
        return next(group for group in self.records if group.tag == tag)


FIGURE_RECORDS = (
    Records("A", 114, 7),
    Records("B", 121, 4),
    Records("C", 125, 8),
    Records("D", 133, 10),
    Records("E", 143, 8),
    Records("F", 151, 5),
)
"""The figures' batches: A/120~114, B/124~121, C/132~125, D/142~133, E/150~143, F/155~151."""

FIG2 = Flow(
    name="fig2",
    seed="003 fig. 2",
    description="Five batches in two flights (A, B, C then D, E), all acknowledged in order.",
    records=FIGURE_RECORDS[:5],
    steps=(Send("A"), Send("B"), Send("C"), Receive(3), Send("D"), Send("E"), Receive(2)),
)

FIG3 = Flow(
    name="fig3",
    seed="003 fig. 3",
    description=(
        "The acks of D and E are lost; the producer reconnects and resends them: the broker "
        "finds them in its 5-batch cache and answers with their original offsets."
    ),
    records=FIGURE_RECORDS[:5],
    steps=(
        Send("A"),
        Send("B"),
        Send("C"),
        Receive(3),
        Send("D"),
        Send("E"),
        Receive(2, lost=True),
        Reconnect(),
        Send("D"),
        Send("E"),
        Receive(2),
    ),
)

FIG4 = Flow(
    name="fig4",
    seed="003 fig. 4",
    description=(
        "C is lost on the way: D and E arrive out of order and are refused with "
        "OUT_OF_ORDER_SEQUENCE_NUMBER; the producer bumps its epoch and resends C, D, E from "
        "sequence 0, in order."
    ),
    records=FIGURE_RECORDS[:5],
    steps=(
        Send("A"),
        Send("B"),
        Send("D"),
        Send("E"),
        Receive(4),
        Send("C", epoch_bump=1, sequence=0),
        Send("D", epoch_bump=1, sequence=8),
        Send("E", epoch_bump=1, sequence=18),
        Receive(3),
    ),
)

FIG5 = Flow(
    name="fig5",
    seed="003 fig. 5",
    description=(
        "Six batches in flight and the first ack lost: the retry of A is outside the 5-batch "
        "cache and gets OUT_OF_ORDER_SEQUENCE_NUMBER; the producer bumps its epoch and resends "
        "A from sequence 0: A is in the log twice."
    ),
    records=FIGURE_RECORDS,
    steps=(
        *(Send(group.tag) for group in FIGURE_RECORDS),
        Receive(1, lost=True),
        Receive(5),
        Send("A"),
        Receive(1),
        Send("A", epoch_bump=1, sequence=0),
        Receive(1),
    ),
)

SEQ_JUMP = Flow(
    name="seq-jump",
    seed="000 demo",
    description=(
        "Sequences 0 and 1, then a batch with sequence 111: OUT_OF_ORDER_SEQUENCE_NUMBER and "
        "nothing written; sequence 2 after it is accepted."
    ),
    records=(Records("a", 0, 1), Records("b", 1, 1), Records("jump", 111, 1), Records("c", 2, 1)),
    steps=(
        Send("a"),
        Receive(),
        Send("b"),
        Receive(),
        Send("jump"),
        Receive(),
        Send("c"),
        Receive(),
    ),
)

KIP360 = Flow(
    name="kip-360",
    seed="002 (KIP-360)",
    description=(
        "Sequences 0 and 1 accepted; the producer's state is removed (reference broker: "
        "expire-producers; Kafka: DeleteRecords past the producer's batches); then sequence 2. "
        "Kafka 2.0 forgot a producer whose batches left the log and answered "
        "UNKNOWN_PRODUCER_ID; Kafka 3.9 keeps the state until producer.id.expiration.ms "
        "(KIP-360's prolonged retention, KAFKA-7190), so DeleteRecords changes nothing and "
        "sequence 2 is accepted, as the reference broker's kafka-3.9 rules accept any sequence "
        "from a producer they no longer know."
    ),
    records=(Records("a", 0, 1), Records("b", 1, 1), Records("c", 2, 1)),
    steps=(
        Send("a"),
        Receive(),
        Send("b"),
        Receive(),
        RemoveProducerState(),
        DescribeProducers(),
        Send("c"),
        Receive(),
    ),
)

FLOWS: dict[str, Flow] = {flow.name: flow for flow in (FIG2, FIG3, FIG4, FIG5, SEQ_JUMP, KIP360)}
