"""The anomalies and checks a run is judged by, and what a scenario may expect of each.

Part of the run directory's contract: :mod:`eoslab.rundir`."""

from __future__ import annotations

import re
from typing import Annotated, Literal, get_args

from pydantic import AfterValidator

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
    "watermark_regression",
    "offset_regression",
    "inconsistent_offset",
]
"""What the checker derives from the topic, the consumption ledger and the sink (ARCHITECTURE.md,
"The consumer half"): a record committed past but never processed; a record processed more than
once; a message whose effect landed in the sink more than once (the exactly-once violation);
per key, effects applied out of key_seq order; a message processed whose effect is nowhere in
the sink (e.g. skipped by the idempotent handler's guard as older than what its order applied).
And what each consumer saw, as Jepsen's Kafka checker judges it: within one member's assignment
epoch (a consumer session in one generation and one assignment of the partition), a
partition's processed offsets that jump over
records of the log (``poll_skip``) or go back (``nonmonotonic_poll``: no rebalance between);
a partition's high watermark, as one consumer's fetches told it, going below what they told it
before (``watermark_regression``);
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
