"""Run directories written by hand: run.json, a history, faults and the checker's verdict in
the checker's own format (built with eoslab.verify.verdict), without a lab or Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from eoslab.fault_events import FaultEffect, FaultEvent, FaultPhase, append_event
from eoslab.rundir import (
    COMMITS_SCHEMA,
    HISTORY_SCHEMA,
    PROCESSED_SCHEMA,
    ConsumptionInfo,
    GxOutcome,
    HandlerMode,
    RunDir,
    RunInfo,
    TransactionsInfo,
    VerdictLinks,
    cell_name,
    message_id,
)
from eoslab.runtime.versions import broker_version
from eoslab.verify.verdict import build_verdict, expected_checks, judge

LIBRDKAFKA = "2.16.1"
START_MS = 1_700_000_000_000
RECORDS = 200


def _history(run: RunDir, run_id: str) -> None:
    rows = [
        {
            "run_id": run_id,
            "session_id": "a" * 32,
            "producer": 0,
            "partition": i % 2,
            "seq": i // 2,
            "key": f"k{i % 5}",
            "key_seq": i // 5,
            "send_ms": START_MS + 10 * i,
            "outcome": "ack",
            "offset": i // 2,
            "error": None,
            "ack_ms": START_MS + 10 * i + 25,
            "latency_ms": 25.0,
        }
        for i in range(RECORDS)
    ]
    pq.write_table(
        pa.Table.from_pylist(rows, schema=HISTORY_SCHEMA), run.history_file(0, "a" * 32, 0)
    )


def _consumption(run: RunDir, run_id: str) -> None:
    """Consumer 0 processes every record in generation 1 and commits every 50; consumer 1 joins
    at record 120 (generation 2) and processes the last 20 records again."""
    run.create_consumption()
    processed, commits = [], []
    deliveries = [(i, 1) for i in range(RECORDS)] + [(i, 2) for i in range(RECORDS - 20, RECORDS)]
    for n, (i, generation) in enumerate(deliveries):
        processed.append(
            {
                "run_id": run_id,
                "consumer": generation - 1,
                "consumer_session": "c" * 32,
                "member_id": f"m{generation}",
                "generation": generation,
                "n": n,
                "partition": i % 2,
                "offset": i // 2,
                "message_id": message_id("a" * 32, i % 2, i // 2),
                "session_id": "a" * 32,
                "producer": 0,
                "seq": i // 2,
                "key": f"k{i % 5}",
                "key_seq": i // 5,
                "effect": "applied" if generation == 1 else "duplicate",
                "apply_order": n if generation == 1 else None,
                "processed_ms": START_MS + 10 * i + 40 + (400 if generation == 2 else 0),
                "assignment": 1,
            }
        )
        if i % 50 == 49 and generation == 1:
            commits += [
                {
                    "run_id": run_id,
                    "consumer": 0,
                    "consumer_session": "c" * 32,
                    "member_id": "m1",
                    "generation": 1 if i < 120 else 2,
                    "commit": i // 50,
                    "trigger": "every",
                    "partition": partition,
                    "offset": i // 2 + 1,
                    "error": None,
                    "committed_ms": START_MS + 10 * i + 50,
                }
                for partition in (0, 1)
            ]
    pq.write_table(
        pa.Table.from_pylist(processed, schema=PROCESSED_SCHEMA),
        run.processed_file(0, "c" * 32),
    )
    pq.write_table(
        pa.Table.from_pylist(commits, schema=COMMITS_SCHEMA), run.commits_file(0, "c" * 32)
    )


def make_run(
    root: Path,
    scenario: str,
    target: str,
    *,
    expected: dict[str, str] | None = None,
    observed: dict[str, int] | None = None,
    checked: bool = True,
    started_ms: int = START_MS,
    mode: HandlerMode | None = None,
    kill_took_effect: bool = True,
    transactional: bool = False,
    history: bool = True,
    client: str | None = None,
) -> Path:
    """A finished run with two faults (lost acks through the proxy, a kill); ``checked`` False
    leaves no verdict (as when the checker crashed); with a ``mode`` it had a consumer
    workload in that mode; ``kill_took_effect`` False makes it invalid (the kill found its
    broker dead already); ``transactional``: its producers were transactional, read
    read_committed; ``history`` False leaves its history empty (nothing acked to plot);
    ``client`` the client its roles ran when not the workload's librdkafka (``java:3.9.2``)."""
    run_id = f"{cell_name(scenario, mode, client)}-{target}-{started_ms}"
    run = RunDir.for_run(run_id, root).create()
    info = RunInfo(
        run_id=run_id,
        scenario=scenario,
        target=target,  # type: ignore[arg-type]
        bootstrap="127.0.0.1:1",
        topic=f"eos-{run_id}",
        partitions=2,
        seed=0,
        started_ms=started_ms,
        ended_ms=started_ms + 2_500,
        librdkafka=LIBRDKAFKA if client is None else None,
        client=client,
        client_version=client or f"librdkafka:{LIBRDKAFKA}",
        broker_version=broker_version(target),  # type: ignore[arg-type]
        expected=expected or {},
        consumption=None
        if mode is None
        else ConsumptionInfo(group=f"eoslab-{run_id}", mode=mode, sink="sqlite:x", consumers=2),
        transactions=TransactionsInfo(
            records_per_transaction=20,
            abort_ratio=0.2,
            transaction_timeout_ms=60_000,
            isolation="read_committed",
        )
        if transactional
        else None,
        faults=[
            FaultEffect(
                step=0,
                kind="proxy",
                target="kafka-1",
                took_effect=True,
                evidence="swallowed responses: 3 Produce on 1 connection(s)",
            ),
            FaultEffect(
                step=1,
                kind="kill",
                target="kafka-2",
                took_effect=kill_took_effect,
                evidence="pid 42 killed (SIGKILL)"
                if kill_took_effect
                else "kafka-2 was dead before the kill and dead after",
            ),
        ],
    )
    run.write_info(info)
    if history:
        _history(run, run_id)
    if mode is not None:
        _consumption(run, run_id)
    for ts, step, kind, where, phase in (
        (500, 0, "proxy:drop-response", "kafka-1", FaultPhase.START),
        (1200, 0, "proxy:drop-response", "kafka-1", FaultPhase.END),
        (1500, 1, "kill", "kafka-2", FaultPhase.INSTANT),
    ):
        event = FaultEvent(ts_ms=START_MS + ts, step=step, kind=kind, target=where, phase=phase)
        append_event(run.faults_jsonl, event)
    if not checked:
        return run.path
    observed = observed or {}
    examples = {
        name: [{"partition": 0, "offset": n, "seq": 3, "session_id": "a" * 32}]
        for name, n in observed.items()
        if n
    }
    verdict = build_verdict(
        info,
        checks=judge(
            expected_checks(expected or {}, consumed=mode is not None, transactional=transactional),
            observed,
            examples,
        ),
        gx=GxOutcome(
            success=True, agrees_with_anomalies=True, suites={}, expectations=[], data_docs=None
        ),
        links=VerdictLinks(anomalies={}, metrics=str(run.metrics_json), data_docs=None),
    )
    run.checker_dir.mkdir()
    run.write_verdict(verdict)
    figures: dict[str, object] = {"records": RECORDS, "sends": RECORDS}
    if mode is not None:
        figures["consumption"] = {"records_processed": RECORDS, "redelivered": 5}
    if transactional:
        figures["transactions"] = {
            "isolation": "read_committed",
            "outcomes": {"committed": 8, "aborted": 2},
            "aborted_records_in_log": 40,
            "reads": {"read_committed": 160, "read_uncommitted": 200},
        }
    run.metrics_json.write_text(json.dumps(figures))
    return run.path
