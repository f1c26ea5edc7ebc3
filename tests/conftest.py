"""Shared fixtures: one real lab (ZooKeeper, 3 Kafka brokers, proxy, reference broker, the warm
Spark) per session, one Spark Connect session on its warm Spark, and a real PostgreSQL server
for the sink (the workload's tests and the checker's read it).

The test lab runs on its own ports (EOSLAB_TEST_PORT_OFFSET, default 1000: Kafka on 10091-3)
and in a temporary state folder, so it never meets a lab a developer has up.
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

from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.postgres import PostgresServer
from eoslab.runtime.topology import LabConfig

TEST_PORT_OFFSET = int(os.environ.get("EOSLAB_TEST_PORT_OFFSET", "1000"))


@pytest.fixture(scope="session", autouse=True)
def _base_temp_open_to_nobody(tmp_path_factory: pytest.TempPathFactory) -> None:
    """PostgreSQL, which refuses root, runs as nobody: it must be able to walk down to the
    labs' folders under pytest's private base folder (pytest makes it private again next run)."""
    base = tmp_path_factory.getbasetemp()
    for folder in (base.parent, base):
        folder.chmod(folder.stat().st_mode | 0o011)


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRuntime]:
    """The running lab; tests that break a service must leave it healthy again."""
    config = LabConfig(
        state_dir=tmp_path_factory.mktemp("lab"), port_offset=TEST_PORT_OFFSET, with_airflow=False
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
