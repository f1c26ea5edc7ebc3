"""The transaction protocol (KIP-98, seed 001's part two) as probe programs: data that runs the
same on any target.

A transaction flow names producers and lists steps on partition 0 of a fresh one-partition
topic; the runner (:mod:`eoslab.probe.txn_runner`) plays them through the transactional ids'
coordinator, the partition's leader and the flow group's coordinator:

- :class:`Init` sends InitProducerId for the producer's transactional id (``txn``: producers that
  name the same one share it; None: an idempotent producer); ``until_ready`` asks again while
  the coordinator answers CONCURRENT_TRANSACTIONS (a fenced transaction still ending);
  ``recover`` sends the producer's own id and epoch (KIP-360/KIP-588: a client recovering from
  a refusal at its epoch, as franz-go does on its next write after INVALID_PRODUCER_EPOCH);
- :class:`Add` (AddPartitionsToTxn), :class:`AddOffsets` (AddOffsetsToTxn),
  :class:`CommitOffsets` (TxnOffsetCommit), :class:`End` (EndTxn, commit or abort) at the
  producer's id and epoch;
- :class:`Produce` sends a batch of ``records`` at the producer's next sequence (transactional
  unless the producer has no transactional id);
- :class:`ListOffsets`, :class:`Fetch` read the partition read_committed or read_uncommitted;
  :class:`FetchOffsets` reads the group's committed offset (``stable``: require_stable);
  :class:`Describe` (DescribeTransactions); :class:`Sleep` lets time pass.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_TIMEOUT_MS = 60_000


@dataclass(frozen=True)
class Init:
    producer: str
    txn: str | None = "t"
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    until_ready: bool = False
    recover: bool = False


@dataclass(frozen=True)
class Add:
    producer: str


@dataclass(frozen=True)
class AddOffsets:
    producer: str


@dataclass(frozen=True)
class Produce:
    producer: str
    records: int = 1


@dataclass(frozen=True)
class CommitOffsets:
    producer: str
    offset: int


@dataclass(frozen=True)
class End:
    producer: str
    commit: bool


@dataclass(frozen=True)
class ListOffsets:
    committed: bool


@dataclass(frozen=True)
class Fetch:
    committed: bool


@dataclass(frozen=True)
class FetchOffsets:
    stable: bool


@dataclass(frozen=True)
class Describe:
    producer: str


@dataclass(frozen=True)
class Sleep:
    ms: int


TxnStep = (
    Init
    | Add
    | AddOffsets
    | Produce
    | CommitOffsets
    | End
    | ListOffsets
    | Fetch
    | FetchOffsets
    | Describe
    | Sleep
)


@dataclass(frozen=True)
class TxnFlow:
    name: str
    seed: str
    description: str
    steps: tuple[TxnStep, ...]


TXN_COMMIT = TxnFlow(
    "txn-commit",
    "001",
    "init, add the partition, produce, commit: the LSO holds at the transaction's first offset "
    "until the COMMIT marker, then read_committed sees the records",
    (
        Init("p"),
        Add("p"),
        Produce("p", records=2),
        ListOffsets(committed=True),
        Fetch(committed=True),
        End("p", commit=True),
        ListOffsets(committed=True),
        Fetch(committed=True),
        Describe("p"),
    ),
)

TXN_ABORT = TxnFlow(
    "txn-abort",
    "001",
    "an aborted transaction, then a committed one: read_committed gets the aborted transaction "
    "in its list, read_uncommitted every record",
    (
        Init("p"),
        Add("p"),
        Produce("p", records=2),
        End("p", commit=False),
        Fetch(committed=True),
        Add("p"),
        Produce("p"),
        End("p", commit=True),
        Fetch(committed=True),
        Fetch(committed=False),
        Describe("p"),
    ),
)

TXN_FENCE = TxnFlow(
    "txn-fence",
    "001",
    "a second producer initialises the same transactional id while the first has a transaction "
    "open: CONCURRENT_TRANSACTIONS while the open one is aborted at a bumped epoch, then the "
    "old epoch is fenced on Produce, AddPartitionsToTxn and EndTxn, and so is its recovery "
    "(InitProducerId at the old id and epoch, KIP-588)",
    (
        Init("p"),
        Add("p"),
        Produce("p", records=2),
        Init("q"),
        Init("q", until_ready=True),
        Produce("p"),
        Add("p"),
        End("p", commit=True),
        Init("p", recover=True),
        Add("q"),
        Produce("q"),
        End("q", commit=True),
        Fetch(committed=True),
        Describe("q"),
    ),
)

TXN_LSO = TxnFlow(
    "txn-lso",
    "001",
    "two transactions open on one partition: the second's COMMIT marker leaves the LSO at the "
    "first's first offset, the first's marker moves it to the end",
    (
        Init("p", txn="a"),
        Init("q", txn="b"),
        Add("p"),
        Produce("p", records=2),
        Add("q"),
        Produce("q"),
        ListOffsets(committed=True),
        ListOffsets(committed=False),
        End("q", commit=True),
        ListOffsets(committed=True),
        Fetch(committed=True),
        End("p", commit=True),
        ListOffsets(committed=True),
        Fetch(committed=True),
    ),
)

TXN_UNADDED = TxnFlow(
    "txn-unadded",
    "001",
    "a transactional batch to a partition not added to the transaction is refused "
    "(INVALID_TXN_STATE: KIP-890's verification, on by default in 3.9); added, it is written",
    (
        Init("p"),
        Produce("p"),
        Add("p"),
        Produce("p"),
        End("p", commit=True),
        Fetch(committed=True),
    ),
)

TXN_OFFSETS = TxnFlow(
    "txn-offsets",
    "001",
    "consumer offsets in a transaction: pending (UNSTABLE_OFFSET_COMMIT to require_stable, the "
    "old offset otherwise) until the commit; without AddOffsetsToTxn, INVALID_TXN_STATE",
    (
        Init("p"),
        AddOffsets("p"),
        CommitOffsets("p", offset=5),
        FetchOffsets(stable=True),
        FetchOffsets(stable=False),
        End("p", commit=True),
        FetchOffsets(stable=True),
        CommitOffsets("p", offset=7),
        FetchOffsets(stable=True),
    ),
)

TXN_TIMEOUT = TxnFlow(
    "txn-timeout",
    "001",
    "a transaction left open past its 2 s timeout is aborted by the coordinator at a bumped "
    "epoch: the LSO moves past it, and the producer's EndTxn is fenced",
    (
        Init("p", timeout_ms=2_000),
        Add("p"),
        Produce("p"),
        Sleep(4_500),
        ListOffsets(committed=True),
        Fetch(committed=True),
        Describe("p"),
        End("p", commit=True),
        Init("p", timeout_ms=2_000),
    ),
)

TXN_LATE_WRITE = TxnFlow(
    "txn-late-write",
    "001",
    "KAFKA-12671, the hanging transaction KIP-890 exists for: a transactional Produce that the "
    "network delayed past its transaction's abort arrives after the abort marker, at the same "
    "epoch (the probe sends it then; a client that timed the request out bumps its epoch, "
    "so none of the three replays it). A leader that does not ask the coordinator (Kafka "
    "before 3.6, or 3.9 with transaction.partition.verification.enable=false) writes it: an "
    "open transaction no coordinator knows, the last stable offset held past the "
    "transaction's timeout, read_committed readers stalled. A leader that asks (KIP-890 part "
    "1, the default since 3.6) refuses it",
    (
        Init("p", timeout_ms=2_000),
        Add("p"),
        End("p", commit=False),
        Produce("p"),
        Sleep(4_500),
        ListOffsets(committed=True),
        ListOffsets(committed=False),
        Describe("p"),
    ),
)

TXN_FLOWS: dict[str, TxnFlow] = {
    flow.name: flow
    for flow in (
        TXN_COMMIT,
        TXN_ABORT,
        TXN_FENCE,
        TXN_LSO,
        TXN_UNADDED,
        TXN_OFFSETS,
        TXN_TIMEOUT,
        TXN_LATE_WRITE,
    )
}
