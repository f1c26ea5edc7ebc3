"""The probes of the inflight-6 and seq-jump scenarios, through the scenario executor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from probe_log import messages_in

from eoslab.probe.runner import PROBE_PRODUCER
from eoslab.rundir.targets import LabTarget
from eoslab.runtime.local import LocalRuntime
from eoslab.scenarios.catalogue import find_scenario
from eoslab.scenarios.executor import RunResult, bootstrap_of, execute

pytestmark = pytest.mark.lab

OOOSN = "OUT_OF_ORDER_SEQUENCE_NUMBER"


def run(lab: LocalRuntime, tmp_path: Path, name: str, target: LabTarget) -> RunResult:
    result = execute(
        find_scenario(name),
        target,
        runtime=lab,
        config=lab.config,
        runs_root=tmp_path,
        records=400,
        show_progress=False,
    )
    assert result.problems == []
    return result


def probe_outcome(result: RunResult) -> dict[str, Any]:
    lines = [json.loads(line) for line in result.run_dir.faults_jsonl.read_text().splitlines()]
    (ended,) = [f for f in lines if f["kind"] == "probe" and f["phase"] == "end"]
    return ended["detail"]["outcome"]


def history_of(result: RunResult, session_id: str) -> list[dict[str, Any]]:
    rows = ds.dataset(result.run_dir.history_dir).to_table().to_pylist()
    return sorted((r for r in rows if r["session_id"] == session_id), key=lambda r: r["seq"])


@pytest.mark.parametrize("target", ["kafka", "refbroker"])
def test_inflight_6_leaves_the_probes_duplicate_and_its_refusal_in_the_history(
    lab: LocalRuntime, tmp_path: Path, target: LabTarget
) -> None:
    result = run(lab, tmp_path, "inflight-6", target)
    outcome = probe_outcome(result)
    rows = history_of(result, outcome["session_id"])

    assert len(rows) == 42  # A..F: 7 + 4 + 8 + 10 + 8 + 5 records
    assert {r["producer"] for r in rows} == {PROBE_PRODUCER}
    assert {r["run_id"] for r in rows} == {result.info.run_id}
    refused = [r for r in rows if r["outcome"] == "fail"]
    assert [(r["key"], r["error"]) for r in refused] == [("A", OOOSN)] * 7
    acked = [r for r in rows if r["outcome"] == "ack"]
    assert len(acked) == 35
    assert all(r["offset"] is not None and r["error"] is None for r in acked)

    logged = messages_in(bootstrap_of(target, lab.config), result.info.topic, 0)
    probe_seqs = [m.seq for _, m in logged if m.session_id == outcome["session_id"]]
    assert len(probe_seqs) == 49
    duplicated = sorted({s for s in probe_seqs if probe_seqs.count(s) > 1})
    assert duplicated == list(range(7))  # A's records, twice in the probe's session
    acked_offsets = {r["seq"]: r["offset"] for r in acked}
    first_copies: dict[int, int] = {}
    for offset, message in logged:
        if message.session_id == outcome["session_id"]:
            first_copies.setdefault(message.seq, offset)
    assert all(first_copies[seq] == offset for seq, offset in acked_offsets.items())


def test_seq_jump_records_the_refused_batch_as_failed(lab: LocalRuntime, tmp_path: Path) -> None:
    result = run(lab, tmp_path, "seq-jump", "kafka")
    outcome = probe_outcome(result)
    assert [a["error"] for a in outcome["answers"]] == ["NONE", "NONE", OOOSN, "NONE"]
    rows = history_of(result, outcome["session_id"])
    assert [(r["seq"], r["key"], r["outcome"], r["error"]) for r in rows] == [
        (0, "a", "ack", None),
        (1, "b", "ack", None),
        (2, "jump", "fail", OOOSN),
        (3, "c", "ack", None),
    ]
    workload_rows = ds.dataset(result.run_dir.history_dir).to_table().num_rows - len(rows)
    assert workload_rows == 400
