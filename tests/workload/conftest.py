"""A real PostgreSQL server for the sink tests, one per test session, on the test port range."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from eoslab.runtime.postgres import PostgresServer

POSTGRES_PORT = 5432 + int(os.environ.get("EOSLAB_TEST_PORT_OFFSET", "1000"))


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
