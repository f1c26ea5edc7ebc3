"""Shared fixtures: one real lab (ZooKeeper, 3 Kafka brokers, proxy, reference broker, the warm
Spark) per session, one Spark Connect session on its warm Spark, and a real PostgreSQL server
for the sink (the workload's tests and the checker's read it).

The test lab runs on its own ports (EOSLAB_TEST_PORT_OFFSET, default 1000: Kafka on 10091-3)
and in a temporary state folder, so it never meets a lab a developer has up.

Kafka 4 (three KRaft nodes) joins the session lab when a collected test is marked ``kafka4``:
one lab, one proxy, one config, as a user's lab with every target; a session without such a
test (a single test file, say) starts no Kafka 4 (README, "Tests").

A lab test that fails is run once more, as Kafka's own CI runs its integration tests
(``maxTestRetries=1``, ``maxTestRetryFailures``): a fault's timing on a loaded two-core machine
now and then lands where a step cannot take effect (each such case found is mended in the
scenario, not left to the rerun). Every test run again is listed at the end with its first
failure, and a session with more than :data:`MAX_RERUN_TESTS` of them fails: flakiness stays
visible and bounded. A test that fails twice fails.

With EOSLAB_TEST_EVENTS set (scripts/test.sh sets it for each half), the test starting is written
to that file and every failure and rerun is added to it with its first line, and every slow test
with its time, as they happen: a run stopped from outside (CI's time limit) can still say where
it was, what had failed and where its time went.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from pyspark.sql import SparkSession

from eoslab.rundir import LAB_TARGETS
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.postgres import PostgresServer
from eoslab.runtime.topology import LabConfig

TEST_PORT_OFFSET = int(os.environ.get("EOSLAB_TEST_PORT_OFFSET", "1000"))
KAFKA4 = "kafka4"
"""The marker of tests that need the lab's Kafka 4."""
WANTS_KAFKA4 = pytest.StashKey[bool]()
LAB_RERUNS = 1
"""How many times a failed lab test is run again (pytest-rerunfailures)."""
MAX_RERUN_TESTS = 3
"""A session with more lab tests run again than this fails, even if every rerun passed."""
_run_again: dict[str, str] = {}
"""Each lab test run again: its first failure's one line."""
EVENTS = os.environ.get("EOSLAB_TEST_EVENTS")
"""The file the session writes its progress to (scripts/test.sh), if any."""
SLOW_S = 10.0
"""A test phase that took this long or longer is written to it with its time."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    config.stash[WANTS_KAFKA4] = any(item.get_closest_marker(KAFKA4) for item in items)
    for item in items:
        if item.get_closest_marker("lab"):
            item.add_marker(pytest.mark.flaky(reruns=LAB_RERUNS))


def _first_line(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    text = (crash.message if crash is not None else str(report.longrepr)).strip()
    return text.splitlines()[0] if text else "?"


def _event(line: str) -> None:
    if EVENTS:
        with open(EVENTS, "a", encoding="utf-8") as events:
            events.write(line + "\n")


def pytest_runtest_logstart(nodeid: str) -> None:
    _event(f"running {nodeid}")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.outcome in ("failed", "rerun"):
        _event(f"{report.outcome} ({report.when}) {report.nodeid}: {_first_line(report)[:200]}")
    elif report.duration >= SLOW_S:
        _event(f"took {report.duration:.0f} s ({report.when}) {report.nodeid}")
    if report.outcome == "rerun" and report.nodeid not in _run_again:
        _run_again[report.nodeid] = _first_line(report)


def _too_many_run_again() -> bool:
    return len(_run_again) > MAX_RERUN_TESTS


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _too_many_run_again() and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _run_again:
        return
    over = _too_many_run_again()
    terminalreporter.section(
        f"lab tests run again: {len(_run_again)} (at most {MAX_RERUN_TESTS}"
        + (": too many, the session fails)" if over else ")"),
        red=over,
        yellow=not over,
    )
    for nodeid, line in _run_again.items():
        terminalreporter.line(f"{nodeid}: {line}")


@pytest.fixture(scope="session", autouse=True)
def _base_temp_open_to_nobody(tmp_path_factory: pytest.TempPathFactory) -> None:
    """PostgreSQL, which refuses root, runs as nobody: it must be able to walk down to the
    labs' folders under pytest's private base folder (pytest makes it private again next run)."""
    base = tmp_path_factory.getbasetemp()
    for folder in (base.parent, base):
        folder.chmod(folder.stat().st_mode | 0o011)


@pytest.fixture(scope="session")
def lab(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalRuntime]:
    """The running lab; tests that break a service must leave it healthy again. Kafka 4 is one
    of its targets when a test of the session is marked ``kafka4``."""
    with_kafka4 = request.config.stash.get(WANTS_KAFKA4, False)
    config = LabConfig(
        state_dir=tmp_path_factory.mktemp("lab"),
        port_offset=TEST_PORT_OFFSET,
        targets=tuple(t for t in LAB_TARGETS if t != KAFKA4 or with_kafka4),
        with_airflow=False,
    )
    runtime = LocalRuntime(config)
    runtime.up()
    try:
        yield runtime
    finally:
        runtime.down(purge=True)


@pytest.fixture(scope="session")
def spark(lab: LocalRuntime) -> Iterator[SparkSession]:
    """One session for the whole run, on the lab's warm Spark (Spark Connect, with Spark's
    Kafka source), as the lab's checks run: no JVM of the tests' own."""
    from eoslab.verify.spark_session import build_session

    session = build_session(remote=lab.config.spark_remote)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def lab_env(tmp_path: Path) -> dict[str, str]:
    """Environment for an `eoslab lab` subprocess that owns a lab of its own (offset + 1500)."""
    tmp_path.chmod(tmp_path.stat().st_mode | 0o011)  # for the lab's PostgreSQL (as nobody)
    return {
        **os.environ,
        "EOSLAB_LAB_DIR": str(tmp_path / "lab"),
        "EOSLAB_PORT_OFFSET": str(TEST_PORT_OFFSET + 1500),
        "EOSLAB_WITH_AIRFLOW": "0",  # Airflow in the lab has tests of its own (tests/orchestration)
        # Kafka 4 has tests of its own (tests/runtime/test_kafka4.py) in the session lab
        "EOSLAB_TARGETS": "kafka,refbroker",
    }


POSTGRES_PORT = 5432 + TEST_PORT_OFFSET


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """Under /tmp: as root the server runs as nobody, who cannot enter pytest's own folders."""
    root = Path(tempfile.mkdtemp(prefix="eoslab-test-postgres-"))
    root.chmod(0o755)
    server = PostgresServer(root / "server", POSTGRES_PORT)
    try:
        with server:
            yield server
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_database(postgres: PostgresServer) -> str:
    return postgres.create_database("sink_tests")


@pytest.fixture
def postgres_url(postgres_database: str) -> str:
    """A fresh schema for one test (cheaper than a database), named by the URL's search_path."""
    schema = f"t_{os.urandom(4).hex()}"
    with psycopg.connect(postgres_database, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    return f"{postgres_database}?options=-csearch_path%3D{schema}"
