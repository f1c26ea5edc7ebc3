"""`eoslab run` with a consumer workload on the real lab: the consumer half of a run directory
(seed 004), produced by the scenario's own nemesis steps."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from eoslab.rundir import HandlerMode, LabTarget, RunDir
from eoslab.runtime.local import LocalRuntime
from eoslab.scenarios.catalogue import find_scenario
from eoslab.scenarios.executor import execute

pytestmark = pytest.mark.lab


def sink_counts(run_dir: RunDir) -> tuple[int, int]:
    """(effects, distinct messages) in the run's SQLite sink."""
    with sqlite3.connect(run_dir.sink_sqlite) as sink:
        effects, messages = sink.execute(
            "SELECT COUNT(*), COUNT(DISTINCT message_id) FROM effects"
        ).fetchone()
    return int(effects), int(messages)


@pytest.mark.parametrize(
    ("target", "mode", "doubled"),
    [("kafka", "commit-after", True), ("refbroker", "dedup-table", False)],
)
def test_a_consumer_crash_before_commit_redelivers(
    lab: LocalRuntime, tmp_path: Path, target: LabTarget, mode: HandlerMode, doubled: bool
) -> None:
    result = execute(
        find_scenario("consumer-crash-before-commit"),
        target,
        runtime=lab,
        config=lab.config,
        runs_root=tmp_path,
        records=900,
        mode=mode,
        show_progress=False,
    )
    assert result.problems == []
    info = result.run_dir.read_info()
    assert info.consumption is not None
    assert info.consumption.mode == mode
    assert info.expected["effect_duplicate"] == (">0" if doubled else "0")
    assert mode in info.run_id
    crashes = [
        json.loads(line)
        for line in result.run_dir.faults_jsonl.read_text().splitlines()
        if json.loads(line)["kind"] == "consumer-crash"
    ]
    assert crashes[0]["detail"]["between_effect_and_commit"] is True
    assert "restarted" in crashes[1]["detail"]
    # consumer 0's first session, the other consumer, consumer 0's second session
    assert len(info.consumption.sessions) == 3
    processed = ds.dataset(result.run_dir.processed_dir).to_table().to_pylist()
    records = [(r["partition"], r["offset"]) for r in processed]
    assert len(records) > len(set(records))  # some were delivered again
    effects, messages = sink_counts(result.run_dir)
    assert messages == 900
    assert (effects > messages) is doubled
