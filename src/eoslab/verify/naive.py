"""The naive checker: one process, a confluent-kafka consumer and Python dicts.

It exists as the benchmark's comparison point for the Spark checker, and computes the very same
counts (see :mod:`eoslab.verify.producer.anomalies` for the definitions): a second, independent
implementation the Spark one is held against — by the tests, and by every check of a small run
(:func:`eoslab.verify.checker.verify_run` runs it beside Spark on the copies of the topics the
check kept, ``kept=True``, and a disagreement makes the verdict invalid). A run with a consumer workload gets the
consumer half's counts as well (:mod:`eoslab.verify.consumer.naive`), a run with transactional
producers the transactions' (:mod:`eoslab.verify.transactions.naive`), a run with a copier stage the
copy's (:mod:`eoslab.verify.copy.naive`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from eoslab.rundir import CORRUPT, FOREIGN, MISPLACED, RunDir
from eoslab.verify.consumer.naive import (
    count_consumer_anomalies,
    read_commits,
    read_processings,
    read_sink_effects,
)
from eoslab.verify.copy.naive import count_copy_anomalies, parse_copy, read_copies
from eoslab.verify.producer.naive import (
    count_anomalies,
    excuse_aborted,
    kept_rows,
    read_history,
    read_kept_log,
    read_log,
)
from eoslab.verify.transactions.naive import (
    aborted_records,
    count_txn_anomalies,
    read_ledger,
    read_reads,
)


@dataclass(frozen=True)
class NaiveResult:
    counts: dict[str, int]
    records: int


def check(run_dir: Path, bootstrap: str | None = None, *, kept: bool = False) -> NaiveResult:
    """Count the anomalies of the run in ``run_dir`` (nothing is written): from its topics, or,
    ``kept``, from the copies of them a check kept in the run directory."""
    run = RunDir(run_dir)
    info = run.read_info()
    log, others = (
        read_kept_log(run.topic_dir, info.run_id)
        if kept
        else read_log(bootstrap or info.bootstrap, info.topic, info.partitions, info.run_id)
    )
    history = read_history(run.history_dir, info.log_starts())
    if info.transactions is not None:
        history = excuse_aborted(history, aborted_records(read_ledger(run)))
    reasons = Counter(other.reason for other in others)
    counts = {
        **count_anomalies(log, history),
        **{name: reasons[name] for name in (FOREIGN, MISPLACED, CORRUPT)},
    }
    if info.consumption is not None:
        records = [
            *(((r.partition, r.offset), (r.session_id, r.key, r.key_seq)) for r in log),
            *(((o.partition, o.offset), None) for o in others),
        ]
        counts |= count_consumer_anomalies(
            records,
            read_processings(run),
            read_sink_effects(info.consumption, run.path),
            read_commits(run),
        )
    if info.transactions is not None:
        counts |= count_txn_anomalies(
            read_ledger(run), read_reads(run, info.transactions.isolation)
        )
    if info.copier is not None:
        counts |= count_copy_anomalies(
            read_ledger(run),
            read_reads(run, "read_committed"),
            [
                copy
                for row in kept_rows(run.copy_topic_dir)
                if (copy := parse_copy(row["partition"], row["offset"], row["value"], info.run_id))
            ]
            if kept
            else read_copies(
                bootstrap or info.bootstrap, info.copier.output_topic, info.partitions, info.run_id
            ),
            info.copier.committed_offsets,
        )
    return NaiveResult(counts=counts, records=len(log))
