"""The sink's database: one schema, the same SQL on SQLite and PostgreSQL, one transaction a record.

A location is a PostgreSQL URL (``postgresql://user:password@127.0.0.1:port/db``) or a SQLite
file path. Statements are written with ``?`` placeholders (psycopg gets ``%s``); only the
auto-numbered ``apply_order`` column is spelled per engine.

SQLite runs in WAL mode with ``synchronous=NORMAL``: a committed transaction is in the file
system when COMMIT returns, so it survives a kill -9 of the consumer (the fault the lab
injects), not a power cut. Writers take the lock up front (``BEGIN IMMEDIATE``) and wait for
it up to BUSY_TIMEOUT_S: a consumer paused inside a transaction stalls the others, as a zombie
holding a lock would.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import psycopg
import psycopg.errors

BUSY_TIMEOUT_S = 60.0
POSTGRES_SCHEMES = ("postgresql", "postgres")

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    producer_session TEXT NOT NULL,
    key TEXT NOT NULL,
    state TEXT NOT NULL,
    version BIGINT NOT NULL,
    changes BIGINT NOT NULL,
    invalid BIGINT NOT NULL,
    last_key_seq BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    PRIMARY KEY (producer_session, key)
);
CREATE TABLE IF NOT EXISTS effects (
    apply_order {apply_order},
    message_id TEXT NOT NULL,
    producer_session TEXT NOT NULL,
    producer INTEGER NOT NULL,
    producer_partition INTEGER NOT NULL,
    seq BIGINT NOT NULL,
    kafka_partition INTEGER NOT NULL,
    kafka_offset BIGINT NOT NULL,
    key TEXT NOT NULL,
    key_seq BIGINT NOT NULL,
    command TEXT NOT NULL,
    order_version BIGINT NOT NULL,
    handler TEXT NOT NULL,
    consumer INTEGER NOT NULL,
    consumer_session TEXT NOT NULL,
    member_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    applied_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS effects_by_message ON effects (message_id);
CREATE TABLE IF NOT EXISTS processed_message (
    message_id TEXT PRIMARY KEY,
    consumer_session TEXT NOT NULL,
    processed_ms BIGINT NOT NULL
);
"""
"""``orders``: one row per order (producer session, key): its state, ``version`` (effects
applied to it), ``changes`` (ORDER_MODIFY effects since its last ORDER_CREATE), ``invalid``
(transitions the state machine forbids) and the ``last_key_seq`` applied. ``effects``: one row
per applied effect, append-only, numbered by ``apply_order``; ``order_version`` is the order's
version right after it (``key_seq + 1`` when every effect of the order landed once, in order).
``processed_message``: the dedup-table handler's record of the messages it applied."""

TABLES = ("orders", "effects", "processed_message")


class Transaction(Protocol):
    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement; its rows (RETURNING or SELECT), else an empty list."""
        ...


APPLY_ORDER = {
    "sqlite": "INTEGER PRIMARY KEY AUTOINCREMENT",
    "postgresql": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
}
"""The one column spelled per engine: ``effects.apply_order``, numbered by the database."""


def is_postgres(location: str | Path) -> bool:
    return urlsplit(str(location)).scheme in POSTGRES_SCHEMES


def describe(location: str | Path) -> str:
    """The location as run.json records it: ``sqlite:<path>``, or the URL without password."""
    if not is_postgres(location):
        return f"sqlite:{location}"
    parts = urlsplit(str(location))
    if parts.password is None:
        return str(location)
    user = f"{parts.username}@" if parts.username else ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}{parts.hostname}{port}"))


class Sink:
    """One connection to the sink database."""

    def __init__(self, location: str | Path) -> None:
        self.location = location
        if is_postgres(location):
            self.engine = "postgresql"
            self._pg: psycopg.Connection[tuple[Any, ...]] | None = psycopg.connect(
                str(location), autocommit=True, connect_timeout=10
            )
            self._lite: sqlite3.Connection | None = None
        else:
            self.engine = "sqlite"
            self._pg = None
            self._lite = sqlite3.connect(location, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            self._lite.execute("PRAGMA journal_mode=WAL")
            self._lite.execute("PRAGMA synchronous=NORMAL")

    def create_schema(self) -> None:
        with self.transaction() as tx:
            for statement in SCHEMA.format(apply_order=APPLY_ORDER[self.engine]).split(";"):
                if statement.strip():
                    tx.execute(statement)

    def is_empty(self) -> bool:
        with self.transaction() as tx:
            return all(not tx.execute(f"SELECT 1 FROM {table} LIMIT 1") for table in TABLES)

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """Commit when the block ends, roll back when it raises."""
        if self._pg is not None:
            with self._pg.transaction():
                yield _PostgresTransaction(self._pg)
            return
        assert self._lite is not None
        self._lite.execute("BEGIN IMMEDIATE")
        try:
            yield _SqliteTransaction(self._lite)
        except BaseException:
            self._lite.execute("ROLLBACK")
            raise
        self._lite.execute("COMMIT")

    def is_unique_violation(self, error: Exception) -> bool:
        if isinstance(error, sqlite3.IntegrityError):
            return error.sqlite_errorname in (
                "SQLITE_CONSTRAINT_PRIMARYKEY",
                "SQLITE_CONSTRAINT_UNIQUE",
            )
        return isinstance(error, psycopg.errors.UniqueViolation)

    def close(self) -> None:
        if self._pg is not None:
            self._pg.close()
        if self._lite is not None:
            self._lite.close()


class _SqliteTransaction:
    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._connection.execute(sql, tuple(params)).fetchall()


class _PostgresTransaction:
    def __init__(self, connection: psycopg.Connection[tuple[Any, ...]]) -> None:
        self._connection = connection

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = self._connection.execute(sql.replace("?", "%s"), tuple(params))
        return cursor.fetchall() if cursor.description is not None else []
