"""`eoslab verify` as a user types it, on the test lab's warm Spark: a run directory given
relative to where the user stands, and what the terminal shows when something fails (one line,
never a traceback). Also every command that reads run.json, on a corrupt one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from eoslab.admin import delete_topic
from eoslab.rundir import RunDir
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.ports import free_port
from eoslab.runtime.topology import SPARK_CONNECT_SERVICE
from eoslab.workload.synthetic import generate

EOSLAB = [sys.executable, "-m", "eoslab.cli"]
LONG_NAME = "a-scenario-name-long-enough-to-be-wider-than-the-verdict-table"


def eoslab(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*EOSLAB, *args],
        cwd=cwd,
        env={**os.environ, "COLUMNS": "80", **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def clean_run(lab: LocalRuntime, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunDir]:
    """A small clean run under ``<folder>/runs/``, its topic deleted afterwards."""
    root = tmp_path_factory.mktemp("verify-cli")
    run, _ = generate(lab.config.bootstrap_servers, root / "runs", 300, name=LONG_NAME)
    try:
        yield run
    finally:
        delete_topic(lab.config.bootstrap_servers, run.read_info().topic)


@pytest.fixture(scope="module")
def lab_env(lab: LocalRuntime) -> dict[str, str]:
    """How a user's shell finds the lab (and with it its warm Spark)."""
    return {
        "EOSLAB_LAB_DIR": str(lab.config.state_dir),
        "EOSLAB_PORT_OFFSET": str(lab.config.port_offset),
        "EOSLAB_WITH_SPARK_CONNECT": "1",
    }


def test_a_relative_run_directory_is_checked_on_the_warm_spark(
    lab: LocalRuntime, clean_run: RunDir, lab_env: dict[str, str]
) -> None:
    """The Spark Connect server resolves a relative path against its own folder: the checker
    hands it absolute paths. At 80 columns the verdict's title (the run id) and the Data Docs
    path are whole."""
    folder = clean_run.path.parent.parent
    done = eoslab(folder, lab_env, "verify", f"runs/{clean_run.run_id}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"checking on the Spark Connect server {lab.config.spark_remote}" in done.stdout
    lines = done.stdout.splitlines()
    assert any(line.startswith("verdict of") for line in lines)
    assert any(clean_run.run_id in line for line in lines)  # wider than the table, yet whole
    assert any(str(clean_run.path / "checker" / "gx") in line for line in lines)
    assert lines[-1] == "conforms"


def test_a_spark_error_is_one_line_naming_the_spark_log(
    lab: LocalRuntime, clean_run: RunDir, lab_env: dict[str, str], tmp_path: Path
) -> None:
    """An unreadable history file fails in Spark: one line (Spark's own condition and message,
    none of its Python and JVM stack traces) and where the warm Spark logs."""
    broken = RunDir(tmp_path / clean_run.run_id)
    shutil.copytree(clean_run.path, broken.path)
    history = next(broken.history_dir.glob("*.parquet"))
    history.write_bytes(b"not parquet")
    done = eoslab(tmp_path, lab_env, "verify", broken.run_id)
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: Spark: [")
    assert history.name in line
    assert f"Spark's log: {LocalRuntime(lab.config).log_path(SPARK_CONNECT_SERVICE)}" in line


def test_an_unreachable_spark_connect_server_is_one_line(tmp_path: Path) -> None:
    """pyspark's client would retry it silently for minutes."""
    remote = f"sc://127.0.0.1:{free_port()}"
    done = eoslab(tmp_path, {}, "verify", "--remote", remote, ".")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"error: no Spark Connect server answers at {remote}"]


def test_a_folder_without_run_json_is_not_a_run_directory(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = eoslab(tmp_path, {}, "verify", "--master", "local[2]", "empty")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "error: empty/run.json: not found: empty is not a run directory"
    ]


@pytest.mark.parametrize(
    ("command", "code"),
    [(("verify", "--master", "local[2]"), 1), (("report", "run"), 1), (("report", "nightly"), 1)],
)
def test_a_corrupt_run_json_is_named_by_every_command_that_reads_it(
    tmp_path: Path, command: tuple[str, ...], code: int
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text('{"run_id": "x", broken')
    done = eoslab(tmp_path, {"EOSLAB_REPORTS_DIR": str(tmp_path / "reports")}, *command, "run")
    assert done.returncode == code, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line == (
        "error: run/run.json: not a valid run.json: "
        "Invalid JSON: key must be a string at line 1 column 17"
    )
