"""Where the checker reads a run's sink from (pure logic): run.json's ``consumption.sink`` as a
JDBC URL and driver properties."""

from __future__ import annotations

from pathlib import Path

import pytest

from eoslab.verify.consumption import (
    POSTGRES_DRIVER,
    SQLITE_DRIVER,
    JdbcSink,
    SinkLocationError,
    jdbc_sink,
)


def test_a_sqlite_sink_is_its_file_relative_to_the_run_or_the_runs_own(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "sink.sqlite").touch()
    (run / "other.sqlite").touch()

    assert jdbc_sink("sqlite:other.sqlite", run) == JdbcSink(
        f"jdbc:sqlite:{run / 'other.sqlite'}", {"driver": SQLITE_DRIVER}
    )
    # recorded where the run was made; the run directory was copied elsewhere since
    moved = jdbc_sink(f"sqlite:{tmp_path / 'gone' / 'sink.sqlite'}", run)
    assert moved.url == f"jdbc:sqlite:{run / 'sink.sqlite'}"
    (run / "sink.sqlite").unlink()
    with pytest.raises(SinkLocationError, match="does not exist"):
        jdbc_sink("sqlite:missing.sqlite", run)


def test_a_postgresql_sink_takes_its_password_from_the_url_or_pgpassword(tmp_path: Path) -> None:
    recorded = "postgresql://eoslab@127.0.0.1:25432/sink?options=-csearch_path%3Dt_1"

    assert jdbc_sink(recorded, tmp_path, {"PGPASSWORD": "s3cret"}) == JdbcSink(
        "jdbc:postgresql://127.0.0.1:25432/sink?options=-csearch_path%3Dt_1",
        {"driver": POSTGRES_DRIVER, "user": "eoslab", "password": "s3cret"},
    )
    assert jdbc_sink("postgres://u:pw@[::1]/db", tmp_path, {}).properties["password"] == "pw"
    assert jdbc_sink("postgres://u:pw@[::1]/db", tmp_path, {}).url == "jdbc:postgresql://[::1]/db"
    assert "password" not in jdbc_sink("postgresql://u@h/db", tmp_path, {}).properties


def test_anything_else_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SinkLocationError, match="expected sqlite:<path> or a postgresql://"):
        jdbc_sink("mysql://h/db", tmp_path)
