"""Where the checker reads a run's sink from (pure logic): run.json's ``consumption.sink`` as a
JDBC URL and driver properties (Spark), and as what the workload's ``Sink`` opens (the naive
checker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eoslab.verify.consumer.sink_location import (
    POSTGRES_DRIVER,
    SQLITE_DRIVER,
    JdbcSink,
    SinkLocationError,
    jdbc_sink,
    sink_database,
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
    assert sink_database("sqlite:other.sqlite", run) == str(run / "other.sqlite")
    assert sink_database(f"sqlite:{tmp_path / 'gone.sqlite'}", run) == str(run / "sink.sqlite")
    (run / "sink.sqlite").unlink()
    for resolve in (jdbc_sink, sink_database):
        with pytest.raises(SinkLocationError, match="does not exist"):
            resolve("sqlite:missing.sqlite", run)


def test_a_postgresql_sink_takes_its_password_from_the_url_or_pgpassword(tmp_path: Path) -> None:
    recorded = "postgresql://eoslab@127.0.0.1:25432/sink?options=-csearch_path%3Dt_1"

    assert jdbc_sink(recorded, tmp_path, {"PGPASSWORD": "s3cret"}) == JdbcSink(
        "jdbc:postgresql://127.0.0.1:25432/sink?options=-csearch_path%3Dt_1",
        {"driver": POSTGRES_DRIVER, "user": "eoslab", "password": "s3cret"},
    )
    assert jdbc_sink("postgres://u:pw@[::1]/db", tmp_path, {}).properties["password"] == "pw"
    assert jdbc_sink("postgres://u:pw@[::1]/db", tmp_path, {}).url == "jdbc:postgresql://[::1]/db"
    assert "password" not in jdbc_sink("postgresql://u@h/db", tmp_path, {}).properties


def test_the_naive_checker_opens_a_postgresql_sink_with_the_same_password(tmp_path: Path) -> None:
    recorded = "postgresql://eoslab@127.0.0.1:25432/sink?options=-csearch_path%3Dt_1"

    assert sink_database(recorded, tmp_path, {"PGPASSWORD": "s3cret"}) == (
        "postgresql://eoslab:s3cret@127.0.0.1:25432/sink?options=-csearch_path%3Dt_1"
    )
    assert sink_database("postgres://u:pw@[::1]/db", tmp_path, {}) == "postgres://u:pw@[::1]/db"
    assert sink_database("postgresql://u@[::1]:5/db", tmp_path, {"PGPASSWORD": "p"}) == (
        "postgresql://u:p@[::1]:5/db"
    )
    assert sink_database("postgresql://u@h/db", tmp_path, {}) == "postgresql://u@h/db"


def test_anything_else_is_refused(tmp_path: Path) -> None:
    for resolve in (jdbc_sink, sink_database):
        with pytest.raises(SinkLocationError, match="expected sqlite:<path> or a postgresql://"):
            resolve("mysql://h/db", tmp_path)
