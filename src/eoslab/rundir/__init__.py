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

The contract in parts, a module each: :mod:`~eoslab.rundir.targets` (where a run goes),
:mod:`~eoslab.rundir.names` (run ids, cell names, run topics),
:mod:`~eoslab.rundir.expectations` (the anomalies and what a scenario may expect),
:mod:`~eoslab.rundir.producer`, :mod:`~eoslab.rundir.consumer`,
:mod:`~eoslab.rundir.transactions` and :mod:`~eoslab.rundir.copy` (each half's ledgers and its
part of run.json), :mod:`~eoslab.rundir.info` (run.json), :mod:`~eoslab.rundir.verdict`
(verdict.json) and :mod:`~eoslab.rundir.directory` (the directory itself, :class:`RunDir`).
Every name is imported from here.
"""

from __future__ import annotations

from eoslab.rundir.consumer import (
    COMMITS_SCHEMA,
    GROUP_PROTOCOLS,
    HANDLER_MODES,
    PROCESSED_SCHEMA,
    CommitTrigger,
    ConsumerSessionInfo,
    ConsumptionInfo,
    Effect,
    GroupProtocol,
    HandlerMode,
    group_protocol_of,
    handler_mode,
    message_id,
)
from eoslab.rundir.copy import COPIER_SCHEMA, COPY_INPUT, COPY_OFFSET, CopierSessionInfo, CopyInfo
from eoslab.rundir.directory import RunDir, RunDirError, read_model
from eoslab.rundir.expectations import (
    CONSUMER_ANOMALIES,
    CONSUMER_EXPECTATIONS,
    COPY_ANOMALIES,
    COPY_EXPECTATIONS,
    CORRUPT,
    DEFAULT_EXPECTATIONS,
    EPOCH_BUMPS,
    ERRORS_KEY,
    EXPECTATION_FORMS,
    EXPECTATION_PATTERN,
    FATAL_KEY,
    FOREIGN,
    HANGING_TRANSACTIONS,
    MISPLACED,
    PRODUCER_ANOMALIES,
    RUN_FLAWS,
    TRANSACTION_ANOMALIES,
    TRANSACTION_EXPECTATIONS,
    UNEXPECTED_FATAL,
    AnomalyName,
    ConsumerAnomaly,
    CopyAnomaly,
    Expectation,
    ProducerAnomaly,
    TransactionAnomaly,
    default_expectations,
)
from eoslab.rundir.info import RUN_FORMAT, RunInfo
from eoslab.rundir.names import KIP848_SUFFIX, cell_name, new_run_id, run_topic
from eoslab.rundir.producer import HISTORY_SCHEMA, Outcome, SessionInfo
from eoslab.rundir.targets import (
    KAFKA_TARGETS,
    LAB_TARGETS,
    REPLICATION,
    TARGETS,
    LabTarget,
    Target,
    lab_target,
)
from eoslab.rundir.transactions import (
    ISOLATIONS,
    READS_SCHEMA,
    TRANSACTIONS_SCHEMA,
    TXN_RECORD,
    Isolation,
    ReadInfo,
    TransactionsInfo,
    TxnOutcome,
)
from eoslab.rundir.verdict import (
    CHECKER_DISAGREES,
    EXIT_CODES,
    Check,
    ExpectationOutcome,
    GxOutcome,
    NaiveAgreement,
    SuiteOutcome,
    Verdict,
    VerdictLinks,
    VerdictStatus,
)

__all__ = [
    "CHECKER_DISAGREES",
    "COMMITS_SCHEMA",
    "CONSUMER_ANOMALIES",
    "CONSUMER_EXPECTATIONS",
    "COPIER_SCHEMA",
    "COPY_ANOMALIES",
    "COPY_EXPECTATIONS",
    "COPY_INPUT",
    "COPY_OFFSET",
    "CORRUPT",
    "DEFAULT_EXPECTATIONS",
    "EPOCH_BUMPS",
    "ERRORS_KEY",
    "EXIT_CODES",
    "EXPECTATION_FORMS",
    "EXPECTATION_PATTERN",
    "FATAL_KEY",
    "FOREIGN",
    "GROUP_PROTOCOLS",
    "HANDLER_MODES",
    "HANGING_TRANSACTIONS",
    "HISTORY_SCHEMA",
    "ISOLATIONS",
    "KAFKA_TARGETS",
    "KIP848_SUFFIX",
    "LAB_TARGETS",
    "MISPLACED",
    "PROCESSED_SCHEMA",
    "PRODUCER_ANOMALIES",
    "READS_SCHEMA",
    "REPLICATION",
    "RUN_FLAWS",
    "RUN_FORMAT",
    "TARGETS",
    "TRANSACTIONS_SCHEMA",
    "TRANSACTION_ANOMALIES",
    "TRANSACTION_EXPECTATIONS",
    "TXN_RECORD",
    "UNEXPECTED_FATAL",
    "AnomalyName",
    "Check",
    "CommitTrigger",
    "ConsumerAnomaly",
    "ConsumerSessionInfo",
    "ConsumptionInfo",
    "CopierSessionInfo",
    "CopyAnomaly",
    "CopyInfo",
    "Effect",
    "Expectation",
    "ExpectationOutcome",
    "GroupProtocol",
    "GxOutcome",
    "HandlerMode",
    "Isolation",
    "LabTarget",
    "NaiveAgreement",
    "Outcome",
    "ProducerAnomaly",
    "ReadInfo",
    "RunDir",
    "RunDirError",
    "RunInfo",
    "SessionInfo",
    "SuiteOutcome",
    "Target",
    "TransactionAnomaly",
    "TransactionsInfo",
    "TxnOutcome",
    "Verdict",
    "VerdictLinks",
    "VerdictStatus",
    "cell_name",
    "default_expectations",
    "group_protocol_of",
    "handler_mode",
    "lab_target",
    "message_id",
    "new_run_id",
    "read_model",
    "run_topic",
]
