"""`eoslab run` end to end on the real lab: run directories the checker can rely on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from eoslab.proxy.control_client import ProxyControl
from eoslab.rundir import RunDir
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.topology import LabConfig
from eoslab.scenarios.catalogue import find_scenario
from eoslab.scenarios.executor import RunError, RunResult, execute
from lab_runs import execute_on

pytestmark = pytest.mark.lab


def run(lab: LocalRuntime, tmp_path: Path, name: str, target: str, records: int) -> RunResult:
    result = execute_on(
        lab,
        tmp_path,
        name,
        target,
        records=records,
    )
    assert result.problems == []
    return result


def history(run_dir: RunDir) -> list[dict[str, Any]]:
    return ds.dataset(run_dir.history_dir).to_table().to_pylist()


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("target", ["kafka", "refbroker"])
def test_baseline_acks_every_record(lab: LocalRuntime, tmp_path: Path, target: str) -> None:
    result = run(lab, tmp_path, "baseline", target, records=1500)
    info = result.run_dir.read_info()
    assert info.target == target
    assert info.topic == f"eos-{info.run_id}"
    assert info.expected["duplicate"] == "0"
    assert len(info.sessions) == 2
    assert all(s.ended_ms is not None for s in info.sessions)
    rows = history(result.run_dir)
    assert len(rows) == 1500
    assert {row["outcome"] for row in rows} == {"ack"}
    assert all(row["offset"] is not None and row["run_id"] == info.run_id for row in rows)
    assert len({(r["session_id"], r["partition"], r["seq"]) for r in rows}) == 1500
    samples = lines(result.run_dir.stats_jsonl)
    assert {s["session_id"] for s in samples} == {s.session_id for s in info.sessions}


def test_lost_acks_make_librdkafka_retry_and_still_ack_everything(
    lab: LocalRuntime, tmp_path: Path
) -> None:
    result = run(lab, tmp_path, "lost-acks", "kafka", records=2500)
    rows = history(result.run_dir)
    assert len(rows) == 2500
    assert {row["outcome"] for row in rows} == {"ack"}
    samples = lines(result.run_dir.stats_jsonl)
    assert max(s["retries"] for s in samples) > 0
    faults = lines(result.run_dir.faults_jsonl)
    ended = [f for f in faults if f["kind"] == "proxy:drop-response" and f["phase"] == "end"]
    assert len(ended) == 1
    assert ended[0]["detail"]["injected"] == 3
    fault_id = ended[0]["detail"]["id"]
    dropped = [
        e for e in ProxyControl(lab.config.proxy_control_url).log() if e["fault_id"] == fault_id
    ]
    assert len(dropped) == 3
    assert {e["direction"] for e in dropped} == {"response"}
    assert ProxyControl(lab.config.proxy_control_url).faults() == []


def test_a_producer_restart_leaves_two_sessions(lab: LocalRuntime, tmp_path: Path) -> None:
    result = run(lab, tmp_path, "producer-restart", "refbroker", records=2000)
    info = result.run_dir.read_info()
    assert len(info.sessions) == 2
    assert {s.producer for s in info.sessions} == {0}
    rows = history(result.run_dir)
    assert {row["session_id"] for row in rows} == {s.session_id for s in info.sessions}
    assert len(rows) == 2000
    assert {row["outcome"] for row in rows} <= {"ack", "indeterminate"}
    crash = [f for f in lines(result.run_dir.faults_jsonl) if f["kind"] == "producer-crash"]
    assert crash[0]["detail"]["session_id"] == info.sessions[0].session_id
    assert crash[-1]["detail"]["restarted"] == info.sessions[1].session_id


def test_an_external_cluster_runs_the_scenarios_that_need_no_lab(
    lab: LocalRuntime, tmp_path: Path
) -> None:
    """The test lab's Kafka plays an external cluster; the 'lab' the executor is given runs
    nothing (nobody listens on its ports), so any use of the runtime, proxy or refbroker fails."""
    nowhere = LabConfig(
        state_dir=tmp_path / "no-lab", port_offset=lab.config.port_offset + 9000, with_airflow=False
    )
    result = execute(
        find_scenario("producer-restart"),
        "external",
        runtime=LocalRuntime(nowhere),
        config=nowhere,
        runs_root=tmp_path,
        records=1000,
        show_progress=False,
        bootstrap=lab.config.bootstrap_servers,
    )
    assert result.problems == []
    info = result.run_dir.read_info()
    assert (info.target, info.bootstrap) == ("external", lab.config.bootstrap_servers)
    assert info.expected == find_scenario("producer-restart").expected.for_run("kafka")
    assert len(info.sessions) == 2
    assert {row["outcome"] for row in history(result.run_dir)} <= {"ack", "indeterminate"}

    with pytest.raises(RunError, match="kill"):
        execute(
            find_scenario("leader-kill"),
            "external",
            runtime=LocalRuntime(nowhere),
            config=nowhere,
            runs_root=tmp_path,
            bootstrap=lab.config.bootstrap_servers,
        )
