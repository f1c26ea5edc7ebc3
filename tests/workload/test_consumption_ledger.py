"""The consumption ledger: the journal survives a kill mid-line, sealing writes the contract's
Parquet files, and a consumer workload spec keeps the workload's own properties."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from eoslab.rundir import COMMITS_SCHEMA, PROCESSED_SCHEMA, RunDir
from eoslab.workload.consumer.consumption import ConsumptionJournal, read_journal, seal_session
from eoslab.workload.consumer.spec import DEFAULT_CONSUMER_CONFIG, ConsumerWorkloadSpec

MEMBERSHIP = {
    "run_id": "run-1",
    "consumer": 1,
    "consumer_session": "s1",
    "member_id": "m",
    "generation": 3,
}


def processed(n: int, **fields: Any) -> dict[str, Any]:
    row = {
        **MEMBERSHIP,
        "n": n,
        "partition": 0,
        "offset": 10 + n,
        "message_id": f"p:0:{n}",
        "session_id": "p",
        "producer": 0,
        "seq": n,
        "key": "k1",
        "key_seq": n,
        "effect": "applied",
        "apply_order": n + 1,
        "processed_ms": 1000 + n,
        "assignment": 1,
    }
    return row | fields


@pytest.fixture
def run_dir(tmp_path: Path) -> RunDir:
    return RunDir(tmp_path / "run-1").create().create_consumption()


def test_a_session_is_sealed_into_the_contract_files_and_a_torn_line_is_dropped(
    run_dir: RunDir,
) -> None:
    journal = ConsumptionJournal(run_dir.consumer_journal_file("s1"))
    journal.processed(processed(0))
    journal.processed(processed(1, effect="duplicate", apply_order=None))
    journal.commit(
        {
            **MEMBERSHIP,
            "commit": 0,
            "trigger": "every",
            "partition": 0,
            "offset": 12,
            "error": None,
            "committed_ms": 1002,
        }
    )
    foreign = dict.fromkeys(("message_id", "session_id", "producer", "seq", "key"))
    journal.processed(processed(2, **foreign, key_seq=None, effect="foreign", apply_order=None))
    journal.close()
    with run_dir.consumer_journal_file("s1").open("ab") as torn:
        torn.write(b'{"table":"processed","run_id":"ru')  # killed in the middle of a line

    assert [table for table, _ in read_journal(run_dir.consumer_journal_file("s1"))] == [
        "processed",
        "processed",
        "commit",
        "processed",
    ]
    assert seal_session(run_dir, 1, "s1") == {"processed": 3, "commit": 1}
    rows = pq.read_table(run_dir.processed_file(1, "s1"))
    assert rows.schema.equals(PROCESSED_SCHEMA)
    assert rows.column("effect").to_pylist() == ["applied", "duplicate", "foreign"]
    assert rows.column("apply_order").to_pylist() == [1, None, None]
    commits = pq.read_table(run_dir.commits_file(1, "s1"))
    assert commits.schema.equals(COMMITS_SCHEMA)
    assert commits.to_pylist()[0]["offset"] == 12
    assert seal_session(run_dir, 1, "s1") == {"processed": 3, "commit": 1}
    assert sorted(p.name for p in run_dir.processed_dir.iterdir()) == ["c1-s1.parquet"]


def test_a_session_without_rows_leaves_no_file(run_dir: RunDir) -> None:
    ConsumptionJournal(run_dir.consumer_journal_file("s2")).close()
    assert seal_session(run_dir, 0, "s2") == {"processed": 0, "commit": 0}
    assert list(run_dir.processed_dir.iterdir()) == []
    assert list(run_dir.commits_dir.iterdir()) == []


def test_a_row_missing_a_required_column_is_refused_at_sealing(run_dir: RunDir) -> None:
    journal = ConsumptionJournal(run_dir.consumer_journal_file("s3"))
    journal.processed({k: v for k, v in processed(0).items() if k != "generation"})
    journal.close()
    with pytest.raises(ValueError, match="generation"):
        seal_session(run_dir, 0, "s3")


def test_the_workload_sets_the_group_and_the_commit_mode_itself() -> None:
    spec = ConsumerWorkloadSpec(mode="dedup-table", config={"session.timeout.ms": 10000})
    assert spec.consumer_config == {**DEFAULT_CONSUMER_CONFIG, "session.timeout.ms": 10000}
    for reserved in ("group.id", "enable.auto.commit"):
        with pytest.raises(ValidationError, match=reserved):
            ConsumerWorkloadSpec(mode="commit-after", config={reserved: "x"})
    with pytest.raises(ValidationError):
        ConsumerWorkloadSpec(mode="exactly-once")  # type: ignore[arg-type]
