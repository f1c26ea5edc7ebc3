"""The sink's PostgreSQL server: Debian's binaries, loopback only, a generated password, a clean
stop, and data that outlives a restart."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from eoslab.runtime.postgres import PostgresError, PostgresServer, binaries

# beside the session lab's own PostgreSQL (5433 + the offset) and the sink fixture's (5432 + it)
PORT = 5433 + int(os.environ.get("EOSLAB_TEST_PORT_OFFSET", "1000")) + 4300


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder under /tmp that user nobody can reach (the server runs as nobody under root)."""
    folder = Path(tempfile.mkdtemp(prefix="eoslab-test-pg-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_server_binaries_are_debians() -> None:
    assert (binaries() / "initdb").is_file()
    assert (binaries() / "postgres").is_file()


def test_a_server_asks_for_its_generated_password_and_keeps_data_over_a_restart(
    open_folder: Path,
) -> None:
    server = PostgresServer(open_folder / "pg", PORT)
    with server:
        password = server.password_file.read_text().strip()
        assert len(password) == 32
        assert oct(server.password_file.stat().st_mode & 0o777) == "0o600"
        url = server.create_database("kept")
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute("CREATE TABLE t (x INT)")
            connection.execute("INSERT INTO t VALUES (42)")
            listen = connection.execute("SHOW listen_addresses").fetchone()
            assert listen == ("127.0.0.1",)
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(url.replace(f":{password}@", ":wrong@"), connect_timeout=5)
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=2)
    with server, psycopg.connect(url) as connection:
        assert connection.execute("SELECT x FROM t").fetchall() == [(42,)]
    assert server.password_file.read_text().strip() == password


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as nobody")
def test_as_root_a_folder_nobody_can_reach_is_refused_with_the_fix(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    with pytest.raises(PostgresError, match="closed to others"):
        PostgresServer(closed / "pg", PORT).init()
