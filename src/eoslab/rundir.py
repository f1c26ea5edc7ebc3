"""The run directory: everything one scenario run leaves behind, and the checker's input.

This layout is the contract between the run executor (which writes it) and the checker
(which reads it and writes only under ``checker/`` and, once, ``topic/``)::

    runs/<run_id>/                 root configurable; default `runs/` in the checkout
      run.json                     RunInfo: scenario, target, topic, seed, expected verdict,
                                   producer config, producer sessions
      history/                     the history ledger, a Parquet dataset (read the directory);
        p<producer>-<session_id>-<part>.parquet
                                   one file per flushed batch of one producer session;
                                   HISTORY_SCHEMA; one row per record's final outcome
      stats.jsonl                  librdkafka statistics samples, one JSON object a line
      faults.jsonl                 the nemesis timeline as executed: FaultEvent lines
                                   (eoslab.fault_events); run.json's ``faults`` judges each step
      journal/<session_id>.tsv     the producer's send journal (internal to the workload: after
                                   a producer is killed it turns in-flight sends into
                                   `indeterminate` history rows)
      consumption/, sink.sqlite    the consumer half, when a consumer workload ran (below)
      topic/                       the run's log as the checker first read it from the topic
                                   (Parquet: partition, offset, key, value, timestamp), kept so
                                   that the run re-checks without its topic; written by the
                                   checker once (``eoslab verify --from-topic`` reads it anew)
      checker/                     written by the checker only
        anomalies/<name>/          Parquet, one dataset per anomaly
        metrics.json
        gx/                        Great Expectations file context and Data Docs
        verdict.json               Verdict: every check, expected against observed

History outcomes (:class:`Outcome`; the error → outcome mapping is in
:mod:`eoslab.workload.producer.outcomes`):

- ``ack``: a delivery report without error; ``offset`` and ``ack_ms`` are set;
- ``fail``: definitely not written (rejected before any write, or never left the client);
- ``indeterminate``: may or may not be in the log (timed out after being sent, fatal
  idempotence error, producer killed before its report arrived, ...);
- ``unsent``: the session ended (cleanly) before the record was transmitted; definitely
  not written. Only ever a tail: every later record of that session+partition is unsent too.
- ``deleted`` (the checker's, never written by a workload): acknowledged below the log start a
  delete-records step moved (:meth:`RunInfo.log_starts`): deleted on purpose, neither lost nor
  a gap.
- ``aborted`` (the checker's too): not acknowledged, a record of a transaction that ended aborted
  (the transaction ledger): rightly absent from the log, since its transaction's abort removed
  the producer's duty to write it (its in-flight sends purged, its sequence numbers reset).

Files starting with ``.`` or ``_`` inside ``history/`` are in-progress writes; Spark and
pyarrow datasets skip them.

``stats.jsonl`` lines: ``producer``, ``session_id``, ``ts_ms`` and librdkafka's ``txmsgs``,
``txretries`` (request retries), ``retries`` (messages transmitted more than once; exact in a session's last sample), ``msg_cnt``, ``eos`` (``idemp_state``, ``epoch_cnt``, ``producer_id``,
``producer_epoch``) and ``brokers`` ({name: {``outbuf_msg_cnt``, ``waitresp_cnt``,
``waitresp_msg_cnt``, ``txretries``, ``req_timeouts``, ``connects``, ``disconnects``}}).

``faults.jsonl`` lines and run.json's ``faults``: see :mod:`eoslab.fault_events` (what each
step did, observed, and whether it took effect; a run where one did not is **invalid**).

The consumer half (seed ``004_*``): the consumer workload's sink and its **consumption
ledger**, what the consumer checker reads beside the topic and the history::

    runs/<run_id>/
      sink.sqlite                  the sink when no PostgreSQL URL is given (a PostgreSQL sink
                                   lives in its server); tables ``orders``, ``effects``,
                                   ``processed_message``
                                   (:mod:`eoslab.workload.consumer.sink.database`)
      consumption/
        processed/c<consumer>-<consumer_session>.parquet
                                   PROCESSED_SCHEMA; one row per record the session processed,
                                   ``n`` = its processing order
        commits/c<consumer>-<consumer_session>.parquet
                                   COMMITS_SCHEMA; one row per partition of every offset commit,
                                   successful or not
        journal/<consumer_session>.jsonl
                                   the session's journal (internal to the workload): each ledger
                                   row as one JSON line in one write(), a processed row before
                                   the commit of its offset; once the session has ended (cleanly
                                   or by kill -9) the supervisor seals it into the two files above
        journal/<consumer_session>.log
                                   the session's stderr

A session's Parquet files appear when it has ended, and only for rows it has (read the
folders as datasets, with the schemas). A record's identity is the producer's
(:func:`message_id`: session id, partition and seq from the value), so a record written twice
by the producer is one message; ``partition`` and ``offset`` say where the consumer read it.
``effect`` (:class:`Effect`): ``applied`` (the handler changed the sink), ``duplicate`` (the
handler changed nothing: it found the message applied already or, the idempotent handler, a
key_seq at or below the last one its order applied, a late older one among them: the sink's
``effects`` tell which, see ``effect_lost``), ``foreign`` (not a workload record of this run:
nothing applied, committed past). ``member_id`` and ``generation`` are the group
membership the consumer's librdkafka held when it processed the record or sent the commit
(the generation its OffsetCommit carries): ``""`` and -1 outside a group generation. Under the
consumer group protocol of KIP-848 (``consumption.group_protocol`` ``consumer``) ``generation``
is the member epoch, which OffsetCommit carries in the same field.
Commit ``trigger`` (:class:`CommitTrigger`): ``every`` (commit_every records since the last),
``idle`` (nothing left to read), ``revoke`` (partitions about to be taken away), ``close``
(clean end of the session), ``auto`` (librdkafka's auto-commit, from its commit report).

Transactions (Kafka's own exactly-once, issue 21): when the workload's producers are
transactional (run.json's ``transactions``), each session also keeps a **transaction ledger**,
and readers of the topic record what consumers at each isolation level saw::

    runs/<run_id>/
      transactions/
        p<producer>-<session_id>.parquet
                                   TRANSACTIONS_SCHEMA; one row per transaction the session
                                   began, with its records and its outcome
      journal/<session_id>.txn.jsonl
                                   the session's transaction journal (internal to the workload):
                                   a ``begin`` line (with the records) before the first send, an
                                   ``ending`` line before EndTxn is asked for, a ``settled`` line
                                   after; sealed into the Parquet file once the session has
                                   ended, cleanly or by kill -9
      journal/reader-<isolation>.log
                                   a reader's stderr
      reads/<isolation>.parquet    READS_SCHEMA; what a consumer at that isolation level
                                   (``read_committed``, ``read_uncommitted``) read of the topic,
                                   live while the workload ran and then to the end of the log

With a copier stage (run.json's ``copier``, consume-transform-produce), the copier sessions
keep a **copier ledger**, and the checker keeps the output topic as read_committed reads it::

    runs/<run_id>/
      copier/w<worker>-<session_id>.parquet
                                   COPIER_SCHEMA; one row per batch the session copied: its
                                   inputs, the offsets committed with them, its outcome
      journal/<session_id>.copy.jsonl, journal/copier-<session_id>.log
                                   the session's journal (sealed into the Parquet file once it
                                   has ended) and its stderr
      copy-topic/                  the output topic as the checker first read it read_committed
                                   (the columns of ``topic/``), kept like ``topic/``

Transaction ``outcome`` (:class:`TxnOutcome`): ``committed`` (commit_transaction returned),
``aborted`` (abort_transaction returned, or the session ended before asking for the commit: a
transaction whose commit was never asked for can only end aborted), ``indeterminate`` (a commit
was asked for and no answer said how it ended: the session was killed, or the call failed
fatally). ``intended`` is what the seeded ratio chose (``commit`` or ``abort``): a commit the
broker refused as abortable ends ``aborted`` with its error. Every record of a transactional
session is in exactly one transaction; the history keeps each record's own delivery outcome as
for any producer.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from eoslab.clients import parse_client
from eoslab.fault_events import FaultEffect
from eoslab.settings import runs_root

RUN_FORMAT: Literal[1] = 1

LabTarget = Literal["kafka", "kafka4", "refbroker"]
"""The lab's systems under test: the 3-broker Kafka 3.9 cluster on ZooKeeper, the 3-node Kafka 4
cluster in KRaft mode, and the reference broker."""
Target = LabTarget | Literal["external"]
"""Where a run goes: one of the lab's targets, or a cluster the user names (Kafka's rules)."""
LAB_TARGETS: tuple[LabTarget, ...] = get_args(LabTarget)
TARGETS: tuple[str, ...] = (*LAB_TARGETS, "external")
KAFKA_TARGETS: tuple[LabTarget, ...] = ("kafka", "kafka4")
"""The lab's real Kafka clusters (what a rule of Kafka's applies to)."""
REPLICATION: dict[str, int] = {"kafka": 3, "kafka4": 3, "refbroker": 1, "external": 3}
"""The replication factor of a run's topic on each target (the reference broker is one node)."""


def lab_target(name: str) -> LabTarget:
    """``name`` as one of the lab's targets; ValueError naming the choices otherwise."""
    for target in LAB_TARGETS:
        if name == target:
            return target
    raise ValueError(f"unknown target {name!r}; choose one of: {', '.join(LAB_TARGETS)}")


ProducerAnomaly = Literal[
    "lost",
    "duplicate",
    "reorder",
    "gap",
    "phantom",
    "indeterminate",
    "key_duplicate",
    "key_reorder",
    "key_gap",
    "misplaced",
    "corrupt",
]
"""What the checker derives from the topic and the history (ARCHITECTURE.md, "Message format
and anomalies"); ``misplaced``: a record of the run in another partition than the one its value
says it was sent to; ``corrupt``: a value that parses as one of the run's but fails its
checksum (changed on the way). Both take part in no other check (a misplaced record's send
shows as lost from its own partition)."""
ConsumerAnomaly = Literal[
    "unprocessed",
    "redelivered",
    "effect_duplicate",
    "effect_reorder",
    "effect_lost",
    "poll_skip",
    "nonmonotonic_poll",
    "offset_regression",
    "inconsistent_offset",
]
"""What the checker derives from the topic, the consumption ledger and the sink (ARCHITECTURE.md,
"The consumer half"): a record committed past but never processed; a record processed more than
once; a message whose effect landed in the sink more than once (the exactly-once violation);
per key, effects applied out of key_seq order; a message processed whose effect is nowhere in
the sink (e.g. skipped by the idempotent handler's guard as older than what its order applied).
And what each consumer saw, as Jepsen's Kafka checker judges it: within one member's assignment
epoch (a consumer session in one generation), a partition's processed offsets that jump over
records of the log (``poll_skip``) or go back (``nonmonotonic_poll``: no rebalance between);
a group's committed offset for a partition that moves backwards (``offset_regression``); a
partition's offset found holding two different records of the run, by two processings or by a
processing and the log (``inconsistent_offset``, Jepsen's inconsistent offsets)."""
TransactionAnomaly = Literal[
    "aborted_read",
    "lost_committed",
    "committed_duplicate",
    "torn_transaction",
    "uncommitted_read",
]
"""What the checker derives from the transaction ledger and a consumer's read of the topic
(named as Jepsen names them where they match): a record of an aborted transaction read (G1a);
a committed transaction's record never read; a record read more than once; a transaction read in
part only; a record read before its transaction was asked to commit (Jepsen's precommitted
read). ``committed_duplicate`` is the read's duplicate: ``duplicate`` stays the producer half's
(one sequence at two offsets of the log, aborted transactions included)."""
CopyAnomaly = Literal["lost_copy", "duplicate_copy", "copy_of_aborted", "committed_uncopied"]
"""What the checker derives from the copier's output (consume-transform-produce, issue 21) read
read_committed, against the input as a read_committed reader saw it and the producers'
transaction ledger: an input record visible to read_committed without a copy; an input record
with more than one copy (what Kafka's exactly-once exists to prevent); a copy of a record of an
aborted input transaction; an input record without a copy below the offset the copier group
committed for its partition (its offset committed, its copy not)."""
AnomalyName = ProducerAnomaly | ConsumerAnomaly | TransactionAnomaly | CopyAnomaly
"""The names a scenario's expectations use."""
PRODUCER_ANOMALIES: tuple[str, ...] = get_args(ProducerAnomaly)
CONSUMER_ANOMALIES: tuple[str, ...] = get_args(ConsumerAnomaly)
TRANSACTION_ANOMALIES: tuple[str, ...] = get_args(TransactionAnomaly)
COPY_ANOMALIES: tuple[str, ...] = get_args(CopyAnomaly)
EXPECTATION_PATTERN = r"^(any|>=0|>[0-9]+|[0-9]+)$"
EXPECTATION_FORMS = '"N" (exactly N), ">N" (more than N), ">=0" or "any" (counted only)'
"""The forms, as an error message names them."""


def _expectation(value: str) -> str:
    if not re.match(EXPECTATION_PATTERN, value):
        raise ValueError(f"{value!r} is not an expectation: {EXPECTATION_FORMS}")
    return value


Expectation = Annotated[str, AfterValidator(_expectation)]
"""``N``: exactly N ("0": none); ``>N``: more than N (">0": at least one); ``>=0`` and ``any``:
counted only, never a mismatch."""
FOREIGN = "foreign"
"""Records of the topic that are not the run's (another format or run): reported, counted, never
an anomaly. A record of the run in the wrong partition or with a corrupt value is no foreign
record: it is ``misplaced`` or ``corrupt``."""
MISPLACED = "misplaced"
CORRUPT = "corrupt"
RUN_FLAWS: tuple[str, ...] = (MISPLACED, CORRUPT)
"""The anomalies of a record of the run that takes part in no other check (ProducerAnomaly)."""
DEFAULT_EXPECTATIONS: dict[str, str] = {
    **dict.fromkeys(PRODUCER_ANOMALIES, "0"),
    "indeterminate": ">=0",
    FOREIGN: "any",
}
"""Unless a scenario says otherwise: no anomaly; indeterminate records allowed; foreign ones
reported."""
CONSUMER_EXPECTATIONS: dict[str, str] = {
    **dict.fromkeys(CONSUMER_ANOMALIES, "0"),
    "redelivered": ">=0",
}
"""Added when a consumer workload ran: no record committed past unprocessed, no effect doubled,
reordered or lost; redelivery allowed (at-least-once), counted."""


TRANSACTION_EXPECTATIONS: dict[str, str] = dict.fromkeys(TRANSACTION_ANOMALIES, "0")
"""Added when the producers were transactional: no transaction anomaly."""
COPY_EXPECTATIONS: dict[str, str] = dict.fromkeys(COPY_ANOMALIES, "0")
"""Added when a copier ran: every visible input copied exactly once, nothing aborted copied."""


def default_expectations(
    consumed: bool, transactional: bool = False, copied: bool = False
) -> dict[str, str]:
    """The checks every run has, the consumer half's when a consumer workload ran, the
    transactions' when the producers were transactional, and the copy's when a copier ran."""
    return {
        **DEFAULT_EXPECTATIONS,
        **(CONSUMER_EXPECTATIONS if consumed else {}),
        **(TRANSACTION_EXPECTATIONS if transactional else {}),
        **(COPY_EXPECTATIONS if copied else {}),
    }


ERRORS_KEY = "errors"
"""``expected["errors"]``: the broker errors a run is expected to provoke; its checks are named
``errors.<NAME>``."""
FATAL_KEY = "fatal"
"""``expected["fatal"]``: the fatal client errors a run is expected to end producer sessions
with (librdkafka's names); its checks are named ``fatal.<NAME>``, and every run has the check
:data:`UNEXPECTED_FATAL`."""
UNEXPECTED_FATAL = "fatal.unexpected"
"""Producer sessions that ended on a fatal error the scenario does not name: expected "0"."""
EPOCH_BUMPS = "epoch_bumps"
"""The check of the producers' epoch bumps (counted, ">=0", unless a scenario expects them)."""
HANGING_TRANSACTIONS = "hanging_transactions"
"""The check of a transactional run's partitions still held by an open transaction at its end
(``transactions.held_at_end``): "0" unless a scenario expects a hanging transaction
(KAFKA-12671: one no coordinator knows, whose partition's last stable offset never moves)."""


class Outcome(StrEnum):
    """A record's final outcome in the history (see the module docstring)."""

    ACK = "ack"
    FAIL = "fail"
    INDETERMINATE = "indeterminate"
    UNSENT = "unsent"
    DELETED = "deleted"
    ABORTED = "aborted"


HISTORY_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("producer", pa.int32(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("key_seq", pa.int64(), nullable=False),
        pa.field("send_ms", pa.int64(), nullable=False),
        pa.field("outcome", pa.string(), nullable=False),
        pa.field("offset", pa.int64()),
        pa.field("error", pa.string()),
        pa.field("ack_ms", pa.int64()),
        pa.field("latency_ms", pa.float64()),
    ]
)
"""The history columns: ``offset`` is null unless ack; ``error`` (librdkafka's error name)
is null on ack; ``ack_ms`` and ``latency_ms`` are null unless a delivery report arrived."""


class SessionInfo(BaseModel):
    """One producer process lifetime: a new session (and a new PID) on every (re)start."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    producer: int
    started_ms: int
    ended_ms: int | None = None
    fatal: str | None = None
    """librdkafka's name of the fatal error the session ended on (an observation, not a
    crash: the session records its outcomes and ends cleanly), e.g. OUT_OF_ORDER_SEQUENCE_NUMBER;
    None when it ended otherwise."""
    fatal_reason: str | None = None
    unsent: int = 0
    """Records of the session's share it never handed to the client (it ended first)."""
    epoch_bumps: int = 0
    """How often the session's producer epoch went up (librdkafka's statistics: a KIP-360
    bump after UNKNOWN_PRODUCER_ID or OUT_OF_ORDER_SEQUENCE_NUMBER, a drained bump after a
    timed-out message)."""


class RunInfo(BaseModel):
    """``run.json``: what ran, where, with which producer config, and what was expected."""

    model_config = ConfigDict(extra="forbid")

    format: Literal[1] = RUN_FORMAT
    run_id: str
    scenario: str
    target: Target
    bootstrap: str
    topic: str
    partitions: int
    seed: int
    started_ms: int
    ended_ms: int | None = None
    producer_config: dict[str, str | int | float | bool] = Field(default_factory=dict)
    expected: dict[str, str | dict[str, str]] = Field(default_factory=dict)
    """Anomaly name -> "0" | ">0" | ">=0" | "any"; plus optional "errors": {error name ->
    the same forms}, the broker error codes the run is expected to provoke."""
    sessions: list[SessionInfo] = Field(default_factory=list)
    consumption: ConsumptionInfo | None = None
    """The consumer half, when a consumer workload ran (see the module docstring)."""
    transactions: TransactionsInfo | None = None
    """The transactional producers and the readers, when the producers were transactional."""
    copier: CopyInfo | None = None
    """The copier stage (consume-transform-produce), when one ran."""
    client: str | None = None
    """The client the run's roles ran when it is not the workload's own librdkafka, as
    ``<family>:<version>`` (``java:3.9.2``, ``librdkafka:2.2.0``; part of the cell's name);
    None: the workload's own."""
    librdkafka: str | None = None
    """The librdkafka version the roles ran (None: they ran another client)."""
    client_version: str | None = None
    """What the client ran says its version is, as ``<family>:<version>`` (the driver program's
    own answer, e.g. the kafka-clients jar's; librdkafka's for librdkafka)."""
    broker_version: str | None = None
    """What the target ran (:func:`eoslab.runtime.versions.broker_version`); None: a cluster
    of the user's, or a run from before it was recorded."""
    judged_as: LabTarget | None = None
    """An external run: the lab target whose timeline and expectations it followed (``eoslab
    run --expect-as``, kafka by default); None: a run on the lab's own targets."""
    broker_config: dict[str, str] = Field(default_factory=dict)
    """The Kafka brokers' dynamic configs the scenario set for this run (``broker_config:``),
    put back when it ended; empty: the brokers as the lab started them."""
    broker_profile: dict[str, str | int] = Field(default_factory=dict)
    """The reference broker's settings for this run when the scenario sets them (``rules``,
    ``retained_batches``); empty: the broker as the lab started it."""
    faults: list[FaultEffect] = Field(default_factory=list)
    """Every step of the nemesis timeline, judged: did it take effect (written at the end)."""
    problems: list[str] = Field(default_factory=list)
    """What went wrong carrying out the run (a step that failed, a heal that failed, a
    timeout); a run with problems is invalid."""

    fronting: dict[str, Any] | None = None
    """An external run with proxy faults: the bootstrap of the proxy the run put in front of
    the cluster (``bootstrap``) and its counters when the run ended (``routes``: connections
    and frames per route; ``fronting``: the answers it rewrote, the addresses it handed out);
    None: the clients reached the cluster as it is."""
    broker_errors: dict[str, int] = Field(default_factory=dict)
    """Produce answers the reference broker gave with an error during the run, by name (its
    counters; empty on Kafka): errors a client retried past leave no trace in the history."""

    def log_starts(self) -> dict[int, int]:
        """Where delete-records steps that took effect moved each partition's log start (the
        highest per partition): records acknowledged below it were deleted on purpose."""
        starts: dict[int, int] = {}
        for fault in self.faults:
            if fault.kind == "delete-records" and fault.took_effect:
                for partition, offset in fault.observed.get("log_start", {}).items():
                    starts[int(partition)] = max(starts.get(int(partition), 0), int(offset))
        return starts

    @property
    def epoch_bumps(self) -> int:
        return sum(session.epoch_bumps for session in self.sessions)

    def fatal_sessions(self) -> dict[str, int]:
        """Producer sessions that ended on a fatal error, by its name."""
        counts: dict[str, int] = {}
        for session in self.sessions:
            if session.fatal is not None:
                counts[session.fatal] = counts.get(session.fatal, 0) + 1
        return counts

    @property
    def cell_name(self) -> str:
        """The run's cell as matrices and reports name it (:func:`cell_name`)."""
        consumption = self.consumption
        return cell_name(
            self.scenario,
            None if consumption is None else consumption.mode,
            self.client,
            "classic" if consumption is None else consumption.group_protocol,
        )

    def invalid_because(self) -> list[str]:
        """Why the run does not test what its scenario says: its problems, and every step that
        did not take effect. Empty for a valid run."""
        return [*self.problems, *(f.summary for f in self.faults if not f.took_effect)]


class Check(BaseModel):
    """One check of a verdict: an observed count against its expectation, with a few rows."""

    name: str
    expected: str
    observed: int
    conforms: bool
    examples: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def summary(self) -> str:
        """The check in one line, as every report and log prints it."""
        return f"{self.name}: expected {self.expected}, observed {self.observed}"


class ExpectationOutcome(BaseModel):
    """One GX expectation's result, and whether it agrees with the anomaly tables it stands
    for (it must succeed exactly when they are empty)."""

    suite: str
    type: str
    check: str
    success: bool
    unexpected: int | None
    anomalies: list[str]
    agrees: bool


class SuiteOutcome(BaseModel):
    version: int
    success: bool


class GxOutcome(BaseModel):
    """What the Great Expectations suites said about the run."""

    success: bool
    agrees_with_anomalies: bool
    suites: dict[str, SuiteOutcome]
    expectations: list[ExpectationOutcome]
    data_docs: str | None


CHECKER_DISAGREES = "checker_disagrees"
"""Why a verdict is invalid when the checker disagrees with itself (a checker bug: no cell may
be green on it)."""


class NaiveAgreement(BaseModel):
    """The naive checker run beside Spark on the same run (:mod:`eoslab.verify.naive`, from the
    copies of the topics the check kept): every count both computed, and each that differs
    (Spark's count, then the naive checker's)."""

    compared: list[str]
    differences: dict[str, list[int]] = Field(default_factory=dict)

    @property
    def agrees(self) -> bool:
        return not self.differences


class VerdictLinks(BaseModel):
    anomalies: dict[str, str]
    metrics: str
    data_docs: str | None


class VerdictStatus(StrEnum):
    """A run's verdict. **invalid** before anything else: a fault that did not take effect (or a
    run that did not go as its scenario says) proves nothing, whatever the checks observed."""

    CONFORMS = "conforms"
    DOES_NOT_CONFORM = "does not conform"
    INVALID = "invalid"

    @property
    def exit_code(self) -> int:
        """What a command that judged runs exits with: 0 conforms, 2 does not conform, 3
        invalid (1 stays for a command that could not do its work)."""
        return EXIT_CODES[self]


EXIT_CODES = {
    VerdictStatus.CONFORMS: 0,
    VerdictStatus.DOES_NOT_CONFORM: 2,
    VerdictStatus.INVALID: 3,
}


class Verdict(BaseModel):
    """``checker/verdict.json``: every check, expected against observed, and every fault, judged.
    A run **conforms** when every fault took effect and every check matches, including runs
    expected to show an anomaly (the negative controls); it is **invalid** when a fault did not
    take effect or the run went wrong (``invalid`` says why); ``mismatches`` repeats the failing
    checks so that a reader sees them first."""

    run_id: str
    scenario: str
    target: str
    status: VerdictStatus
    conforms: bool
    """``status == conforms``."""
    invalid: list[str] = Field(default_factory=list)
    faults: list[FaultEffect] = Field(default_factory=list)
    checked_ms: int
    """When the checker wrote the verdict: a run's work ends there, not with its workload."""
    checks: list[Check]
    mismatches: list[Check]
    gx: GxOutcome
    naive: NaiveAgreement | None = None
    """The naive checker beside Spark; None when it did not run (a run too large for it)."""
    links: VerdictLinks


KIP848_SUFFIX = "kip848"


def cell_name(
    scenario: str, mode: str | None, client: str | None = None, group_protocol: str = "classic"
) -> str:
    """How a run's scenario is named in run ids, matrices and reports: with its handler mode
    when it has a consumer workload (``consumer-crash-before-commit.dedup-table``), ``.kip848``
    when its consumers use the consumer group protocol of KIP-848, and with its client when it is
    not the workload's own librdkafka (``lost-request_librdkafka-2.2.0``,
    ``lost-acks_java-3.9.2``: characters a Kafka topic name allows)."""
    name = scenario if mode is None else f"{scenario}.{mode}"
    if group_protocol == "consumer":
        name = f"{name}.{KIP848_SUFFIX}"
    return name if client is None else f"{name}_{parse_client(client).slug}"


def new_run_id(scenario: str, target: str) -> str:
    """``<UTC time>-<scenario>-<target>-<4 hex>``, e.g. ``20261121T231500Z-baseline-kafka-ab12``:
    sorts by start time, says what ran, and stays unique for runs started the same second."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"{stamp}-{scenario}-{target}-{secrets.token_hex(2)}"


def run_topic(run_id: str) -> str:
    """The topic the lab makes for a run, ``eos-<run id>``: on a cluster of the user's, the
    prefix and the id say whose it is (``eoslab lab prune --external`` deletes no other)."""
    return f"eos-{run_id}"


class RunDirError(ValueError):
    """A run directory's JSON file (run.json, verdict.json) that is not what the contract says:
    the message names the file and every problem, on one line."""


Model = TypeVar("Model", bound=BaseModel)


def read_model(model: type[Model], path: Path) -> Model:
    """``path`` read as ``model``; :class:`RunDirError` naming the file when its content is not
    one (a missing file raises FileNotFoundError, which names it)."""
    text = path.read_bytes()
    try:
        return model.model_validate_json(text)
    except ValidationError as error:
        details = error.errors(include_url=False)
        missing = [".".join(map(str, d["loc"])) for d in details if d["type"] == "missing"]
        problems = [f"missing {', '.join(missing)}"] if missing else []
        problems += [
            f"{'.'.join(map(str, d['loc']))}: {d['msg']}" if d["loc"] else d["msg"]
            for d in details
            if d["type"] != "missing"
        ]
        raise RunDirError(f"{path}: not a valid {path.name}: {'; '.join(problems)}") from None


class RunDir:
    """The paths of one run directory (see the module docstring for the layout)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @classmethod
    def for_run(cls, run_id: str, root: Path | None = None) -> RunDir:
        return cls((root or runs_root()) / run_id)

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def run_json(self) -> Path:
        return self.path / "run.json"

    @property
    def history_dir(self) -> Path:
        return self.path / "history"

    def history_rows(self) -> int:
        """The history's rows so far, from the Parquet footers (no data read); a file still
        being written counts once it is complete."""
        total = 0
        for part in self.history_dir.glob("*.parquet"):
            try:
                total += pq.read_metadata(part).num_rows
            except (OSError, ValueError):
                continue
        return total

    @property
    def stats_jsonl(self) -> Path:
        return self.path / "stats.jsonl"

    @property
    def faults_jsonl(self) -> Path:
        return self.path / "faults.jsonl"

    @property
    def journal_dir(self) -> Path:
        return self.path / "journal"

    @property
    def topic_dir(self) -> Path:
        return self.path / "topic"

    @property
    def has_topic_snapshot(self) -> bool:
        """Whether the checker kept the run's log (a complete Spark write: ``_SUCCESS``)."""
        return (self.topic_dir / "_SUCCESS").is_file()

    @property
    def checker_dir(self) -> Path:
        return self.path / "checker"

    @property
    def anomalies_dir(self) -> Path:
        return self.checker_dir / "anomalies"

    def anomaly_dir(self, name: str) -> Path:
        return self.anomalies_dir / name

    @property
    def metrics_json(self) -> Path:
        return self.checker_dir / "metrics.json"

    @property
    def gx_dir(self) -> Path:
        return self.checker_dir / "gx"

    @property
    def verdict_json(self) -> Path:
        return self.checker_dir / "verdict.json"

    def history_file(self, producer: int, session_id: str, part: int) -> Path:
        return self.history_dir / f"p{producer}-{session_id}-{part:05d}.parquet"

    def journal_file(self, session_id: str) -> Path:
        return self.journal_dir / f"{session_id}.tsv"

    def create(self) -> RunDir:
        """Make the directory and the workload's folders (the run id must be new)."""
        self.path.mkdir(parents=True, exist_ok=False)
        self.history_dir.mkdir()
        self.journal_dir.mkdir()
        return self

    def write_info(self, info: RunInfo) -> None:
        """Replace run.json atomically, so a reader never sees half of it."""
        partial = self.path / ".run.json.partial"
        partial.write_text(info.model_dump_json(indent=2) + "\n")
        os.replace(partial, self.run_json)

    def read_info(self) -> RunInfo:
        return read_model(RunInfo, self.run_json)

    def write_verdict(self, verdict: Verdict) -> None:
        self.verdict_json.write_text(verdict.model_dump_json(indent=2) + "\n")

    def read_verdict(self) -> Verdict:
        return read_model(Verdict, self.verdict_json)

    def append_jsonl(self, path: Path, record: dict[str, object]) -> None:
        """Append one line in one write (O_APPEND): writers in several processes interleave
        whole lines, never fragments."""
        line = (json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n").encode()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    # ------------------------------------------------------------ transactions (issue 21)
    @property
    def transactions_dir(self) -> Path:
        return self.path / "transactions"

    @property
    def reads_dir(self) -> Path:
        return self.path / "reads"

    def transactions_file(self, producer: int, session_id: str) -> Path:
        return self.transactions_dir / f"p{producer}-{session_id}.parquet"

    def txn_journal_file(self, session_id: str) -> Path:
        return self.journal_dir / f"{session_id}.txn.jsonl"

    def reader_log_file(self, isolation: str) -> Path:
        return self.journal_dir / f"reader-{isolation}.log"

    def reads_file(self, isolation: str) -> Path:
        return self.reads_dir / f"{isolation}.parquet"

    @property
    def copier_dir(self) -> Path:
        return self.path / "copier"

    @property
    def copy_topic_dir(self) -> Path:
        return self.path / "copy-topic"

    def copier_file(self, worker: int, session_id: str) -> Path:
        return self.copier_dir / f"w{worker}-{session_id}.parquet"

    def copier_journal_file(self, session_id: str) -> Path:
        return self.journal_dir / f"{session_id}.copy.jsonl"

    def copier_log_file(self, session_id: str) -> Path:
        return self.journal_dir / f"copier-{session_id}.log"

    def create_transactions(self) -> RunDir:
        """Make the transaction ledger's and the readers' folders (the run directory exists)."""
        for folder in (self.transactions_dir, self.reads_dir):
            folder.mkdir(parents=True, exist_ok=True)
        return self

    # ------------------------------------------------------------ the consumer half (seed 004)
    @property
    def sink_sqlite(self) -> Path:
        return self.path / "sink.sqlite"

    @property
    def consumption_dir(self) -> Path:
        return self.path / "consumption"

    @property
    def processed_dir(self) -> Path:
        return self.consumption_dir / "processed"

    @property
    def commits_dir(self) -> Path:
        return self.consumption_dir / "commits"

    @property
    def consumer_journal_dir(self) -> Path:
        return self.consumption_dir / "journal"

    def processed_file(self, consumer: int, session_id: str) -> Path:
        return self.processed_dir / f"c{consumer}-{session_id}.parquet"

    def commits_file(self, consumer: int, session_id: str) -> Path:
        return self.commits_dir / f"c{consumer}-{session_id}.parquet"

    def consumer_journal_file(self, session_id: str) -> Path:
        return self.consumer_journal_dir / f"{session_id}.jsonl"

    def consumer_log_file(self, session_id: str) -> Path:
        return self.consumer_journal_dir / f"{session_id}.log"

    def create_consumption(self) -> RunDir:
        """Make the consumption ledger's folders (the run directory may exist already)."""
        for folder in (self.processed_dir, self.commits_dir, self.consumer_journal_dir):
            folder.mkdir(parents=True, exist_ok=True)
        return self


# ================================================================================================
# The consumer half (seed 004): handler modes, the consumption ledger's schemas, run.json's part.
# ================================================================================================

HandlerMode = Literal["auto-commit", "commit-after", "idempotent", "dedup-table"]
"""How a consumer applies records and commits offsets (ARCHITECTURE.md, "The consumer half")."""
HANDLER_MODES: tuple[HandlerMode, ...] = get_args(HandlerMode)
GroupProtocol = Literal["classic", "consumer"]
"""The consumer group protocol (librdkafka's ``group.protocol``): ``classic`` (JoinGroup,
SyncGroup, Heartbeat: the group leader assigns) or ``consumer``, KIP-848's
(ConsumerGroupHeartbeat: the broker assigns, a member epoch per member). The lab's Kafka 4 speaks
both; Kafka 3.9 and the reference broker the classic one only."""
GROUP_PROTOCOLS: tuple[GroupProtocol, ...] = get_args(GroupProtocol)


def handler_mode(name: str | None) -> HandlerMode | None:
    """``name`` as a handler mode (None stays None); ValueError naming the choices otherwise."""
    if name is None:
        return None
    for mode in HANDLER_MODES:
        if name == mode:
            return mode
    raise ValueError(f"unknown handler mode {name!r}; choose one of: {', '.join(HANDLER_MODES)}")


def group_protocol_of(name: str | None) -> GroupProtocol | None:
    """``name`` as a group protocol (None or empty: None); ValueError naming the choices."""
    if not name:
        return None
    for protocol in GROUP_PROTOCOLS:
        if name == protocol:
            return protocol
    raise ValueError(
        f"unknown group protocol {name!r}; choose one of: {', '.join(GROUP_PROTOCOLS)}"
    )


class Effect(StrEnum):
    """What processing a record did to the sink (see the module docstring)."""

    APPLIED = "applied"
    DUPLICATE = "duplicate"
    FOREIGN = "foreign"


class CommitTrigger(StrEnum):
    """Why a consumer committed (see the module docstring)."""

    EVERY = "every"
    IDLE = "idle"
    REVOKE = "revoke"
    CLOSE = "close"
    AUTO = "auto"


def message_id(session_id: str, partition: int, seq: int) -> str:
    """A record's identity, the producer's: ``<session_id>:<partition>:<seq>`` of the value."""
    return f"{session_id}:{partition}:{seq}"


_MEMBERSHIP = [
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("consumer", pa.int32(), nullable=False),
    pa.field("consumer_session", pa.string(), nullable=False),
    pa.field("member_id", pa.string(), nullable=False),
    pa.field("generation", pa.int32(), nullable=False),
]

PROCESSED_SCHEMA = pa.schema(
    [
        *_MEMBERSHIP,
        pa.field("n", pa.int64(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("message_id", pa.string()),
        pa.field("session_id", pa.string()),
        pa.field("producer", pa.int32()),
        pa.field("seq", pa.int64()),
        pa.field("key", pa.string()),
        pa.field("key_seq", pa.int64()),
        pa.field("effect", pa.string(), nullable=False),
        pa.field("apply_order", pa.int64()),
        pa.field("processed_ms", pa.int64(), nullable=False),
    ]
)
"""The processed records: the message columns (``message_id`` .. ``key_seq``, from the value)
are null for a ``foreign`` record; ``apply_order`` (the sink's ``effects.apply_order``) is null
unless ``applied``; ``processed_ms`` is when the sink's transaction ended."""

COMMITS_SCHEMA = pa.schema(
    [
        *_MEMBERSHIP,
        pa.field("commit", pa.int64(), nullable=False),
        pa.field("trigger", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("committed_ms", pa.int64(), nullable=False),
    ]
)
"""The commits: ``commit`` numbers a session's commits (0, 1, ...; one per request, a row per
partition); ``offset`` is the committed position (the next record to read); ``error`` is null
on success, else librdkafka's error name (for the partition, or for the whole request)."""


class ConsumerSessionInfo(BaseModel):
    """One consumer process lifetime: a new session (and a new group member) on every start."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    consumer: int
    started_ms: int
    ended_ms: int | None = None


class ConsumptionInfo(BaseModel):
    """``run.json``'s ``consumption``: the consumer workload's group, mode and sink."""

    model_config = ConfigDict(extra="forbid")

    group: str
    mode: HandlerMode
    group_protocol: GroupProtocol = "classic"
    sink: str
    """``sqlite:<path>`` or the PostgreSQL URL without its password."""
    consumers: int
    consumer_config: dict[str, str | int | float | bool] = Field(default_factory=dict)
    sessions: list[ConsumerSessionInfo] = Field(default_factory=list)


# ================================================================================================
# Transactions (issue 21): the transaction ledger, the readers' reads, run.json's part.
# ================================================================================================

Isolation = Literal["read_committed", "read_uncommitted"]
"""A consumer's ``isolation.level``."""
ISOLATIONS: tuple[Isolation, ...] = get_args(Isolation)


class TxnOutcome(StrEnum):
    """How a transaction ended, as its producer knows it (see the module docstring)."""

    COMMITTED = "committed"
    ABORTED = "aborted"
    INDETERMINATE = "indeterminate"


TXN_RECORD = pa.struct(
    [
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("key_seq", pa.int64(), nullable=False),
    ]
)
"""One record of a transaction: with the row's ``session_id`` the record's identity."""

TRANSACTIONS_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("producer", pa.int32(), nullable=False),
        pa.field("transactional_id", pa.string(), nullable=False),
        pa.field("producer_id", pa.int64()),
        pa.field("producer_epoch", pa.int32()),
        pa.field("txn", pa.int64(), nullable=False),
        pa.field("intended", pa.string(), nullable=False),
        pa.field("outcome", pa.string(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("begin_ms", pa.int64(), nullable=False),
        pa.field("end_ms", pa.int64()),
        pa.field("settled_ms", pa.int64()),
        pa.field("records", pa.list_(TXN_RECORD), nullable=False),
    ]
)
"""The transaction ledger: ``txn`` numbers a session's transactions (0, 1, ...); ``producer_id``
and ``producer_epoch`` are what librdkafka's statistics last showed before the transaction
settled (null before the first sample); ``end_ms`` is when the commit or abort was asked for
(null if it never was), ``settled_ms`` when its answer came (null without one); ``error`` is
librdkafka's name of the error the transaction ended on (null when it ended as intended)."""

READS_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("isolation", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("session_id", pa.string()),
        pa.field("producer", pa.int32()),
        pa.field("seq", pa.int64()),
        pa.field("key", pa.string()),
        pa.field("key_seq", pa.int64()),
        pa.field("read_ms", pa.int64(), nullable=False),
    ]
)
"""A reader's records in the order it read them: the message columns are null for a record that
is not this run's."""


class ReadInfo(BaseModel):
    """One reader's account: how much it read and whether it reached the end of every
    partition (a read that did not is incomplete, and the run invalid)."""

    model_config = ConfigDict(extra="forbid")

    isolation: Isolation
    records: int = 0
    complete: bool = False
    end_offsets: dict[int, int] = Field(default_factory=dict)
    """Where it read up to: the last stable offsets (read_committed) or the high watermarks."""


class TransactionsInfo(BaseModel):
    """``run.json``'s ``transactions``: the transactional producers' settings and the readers."""

    model_config = ConfigDict(extra="forbid")

    records_per_transaction: int
    abort_ratio: float
    transaction_timeout_ms: int
    isolation: Isolation
    """The isolation level of the consumer under test: the read the checks run on."""
    transactional_ids: list[str] = Field(default_factory=list)
    reads: list[ReadInfo] = Field(default_factory=list)
    held_at_end: dict[int, list[int]] = Field(default_factory=dict)
    """Partitions a transaction still held when the run ended (transaction.timeout.ms and a
    margin after the workload: no coordinator would end it any more), each with its [last
    stable offset, high watermark]: the check :data:`HANGING_TRANSACTIONS`."""


COPY_INPUT = pa.struct(
    [
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("session_id", pa.string()),
        pa.field("seq", pa.int64()),
    ]
)
"""One input record a copier transaction consumed and copied: its place in the input topic and
(null for a record that is not the run's) its identity."""
COPY_OFFSET = pa.struct(
    [
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
    ]
)

COPIER_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("worker", pa.int32(), nullable=False),
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("transactional_id", pa.string()),
        pa.field("producer_id", pa.int64()),
        pa.field("producer_epoch", pa.int32()),
        pa.field("txn", pa.int64(), nullable=False),
        pa.field("outcome", pa.string(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("begin_ms", pa.int64(), nullable=False),
        pa.field("end_ms", pa.int64()),
        pa.field("settled_ms", pa.int64()),
        pa.field("inputs", pa.list_(COPY_INPUT), nullable=False),
        pa.field("offsets", pa.list_(COPY_OFFSET), nullable=False),
    ]
)
"""The copier ledger: one row per batch a copier session copied (``txn`` numbers them, 0, 1,
...): the input records it consumed (``inputs``; each copied to the output topic, key kept, the
value naming the input's place: :func:`eoslab.message.encode_copy`), the consumer offsets it
committed with them (``offsets``: per partition, the next input to read), and how it ended
(``outcome``, as a transaction's, :class:`TxnOutcome`). ``transactional_id``, ``producer_id``
and ``producer_epoch`` are null for an at-least-once copier (copies produced, then offsets
committed apart: ``committed`` means its offset commit succeeded)."""


class CopierSessionInfo(BaseModel):
    """One copier worker process lifetime: a new session (a new group member) on every start."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    worker: int
    started_ms: int
    ended_ms: int | None = None
    crashed: bool = False
    """Killed itself (-9): at its seeded crash point (between producing copies and committing),
    or because a librdkafka call hung (``hung_in``)."""
    hung_in: str | None = None
    """The librdkafka call that did not return within its timeout (the watchdog killed the
    session: an observation of the client, not a failure of the run)."""


class CopyInfo(BaseModel):
    """``run.json``'s ``copy``: the copier stage (consume-transform-produce)."""

    model_config = ConfigDict(extra="forbid")

    output_topic: str
    group: str
    workers: int
    records_per_transaction: int
    transactional: bool
    """False: the at-least-once copier (the negative control)."""
    transactional_ids: list[str] = Field(default_factory=list)
    sessions: list[CopierSessionInfo] = Field(default_factory=list)
    committed_offsets: dict[int, int] = Field(default_factory=dict)
    """The copier group's committed offset per input partition at the end, as its coordinator
    answered (a partition never committed is left out)."""


RunInfo.model_rebuild()
