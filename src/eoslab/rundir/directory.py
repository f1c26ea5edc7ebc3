"""The run directory itself (RunDir): its paths, and reading and writing its JSON files; run ids, cell names and run topics.

Part of the run directory's contract: :mod:`eoslab.rundir`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TypeVar

import pyarrow.parquet as pq
from pydantic import BaseModel, ValidationError

from eoslab.rundir.info import RunInfo
from eoslab.rundir.verdict import Verdict
from eoslab.settings import runs_root


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
