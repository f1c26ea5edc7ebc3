"""Where a run's sink is: run.json's ``consumption.sink``, as the workload recorded it, resolved
to what the Spark checker's JDBC source reads (:func:`jdbc_sink`) and what the naive checker
opens with the workload's own :class:`eoslab.workload.consumer.sink.database.Sink`
(:func:`sink_database`):

- ``sqlite:<path>``: a relative path is the run directory's; when the recorded file is gone but
  the run directory holds ``sink.sqlite`` (the default sink, in a run directory copied
  elsewhere), that one is read.
- a PostgreSQL URL (``postgresql://user@host:port/db?options=...``), recorded without its
  password: the password from the URL if it has one, else from ``PGPASSWORD``, the variable
  libpq and psql read, else the lab's own when the URL is the lab's PostgreSQL (``eoslab run
  --sink lab``); pgjdbc and libpq also read ``~/.pgpass``. The URL's query parameters
  (``options=-csearch_path=...``, ``sslmode``, ...) go to the driver, which knows libpq's names
  for them.

Pure logic: no Spark here, so that the naive checker stays a process of its own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import SplitResult, urlsplit, urlunsplit

from eoslab.rundir import RunDir
from eoslab.runtime.postgres import lab_password
from eoslab.workload.consumer.sink.database import is_postgres

SQLITE_PREFIX = "sqlite:"
SQLITE_DRIVER = "org.sqlite.JDBC"
POSTGRES_DRIVER = "org.postgresql.Driver"
PASSWORD_VARIABLE = "PGPASSWORD"


class SinkLocationError(ValueError):
    """run.json's sink is neither ``sqlite:<path>`` nor a PostgreSQL URL, or its file is gone."""


@dataclass(frozen=True)
class JdbcSink:
    """Where Spark's JDBC source reads the sink: a JDBC URL and the driver's properties."""

    url: str
    properties: dict[str, str] = field(default_factory=dict)


def jdbc_sink(sink: str, run_dir: Path, environ: Mapping[str, str] = os.environ) -> JdbcSink:
    """The JDBC location of run.json's ``consumption.sink`` (see the module docstring)."""
    if sink.startswith(SQLITE_PREFIX):
        return JdbcSink(f"jdbc:sqlite:{_sqlite_file(sink, run_dir)}", {"driver": SQLITE_DRIVER})
    parts = _postgres_url(sink)
    host = _host(parts)
    port = f":{parts.port}" if parts.port else ""
    query = f"?{parts.query}" if parts.query else ""
    properties = {"driver": POSTGRES_DRIVER}
    if parts.username:
        properties["user"] = parts.username
    password = _password(parts, environ)
    if password is not None:
        properties["password"] = password
    return JdbcSink(
        f"jdbc:postgresql://{host or 'localhost'}{port}{parts.path or '/'}{query}", properties
    )


def sink_database(sink: str, run_dir: Path, environ: Mapping[str, str] = os.environ) -> str:
    """run.json's ``consumption.sink`` as the workload's ``Sink`` opens it: the SQLite file, or
    the PostgreSQL URL with its password (see the module docstring)."""
    if sink.startswith(SQLITE_PREFIX):
        return str(_sqlite_file(sink, run_dir))
    parts = _postgres_url(sink)
    password = _password(parts, environ)
    if password is None or parts.password is not None:
        return sink
    user = parts.username or ""
    port = f":{parts.port}" if parts.port else ""
    netloc = f"{user}:{password}@{_host(parts)}{port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _sqlite_file(sink: str, run_dir: Path) -> Path:
    """The sink's file, absolute: a Spark Connect server resolves a relative path against its
    own working directory, not the caller's."""
    path = Path(sink[len(SQLITE_PREFIX) :])
    recorded = path if path.is_absolute() else run_dir / path
    if recorded.is_file():
        return recorded.resolve()
    default = RunDir(run_dir).sink_sqlite
    if default.is_file():
        return default.resolve()
    raise SinkLocationError(f"the sink {recorded} does not exist (nor {default})")


def _postgres_url(sink: str) -> SplitResult:
    if not is_postgres(sink):
        raise SinkLocationError(
            f"sink {sink!r}: expected {SQLITE_PREFIX}<path> or a postgresql:// URL"
        )
    return urlsplit(sink)


def _host(parts: SplitResult) -> str | None:
    host = parts.hostname
    return f"[{host}]" if host and ":" in host else host


def _password(parts: SplitResult, environ: Mapping[str, str]) -> str | None:
    if parts.password is not None:
        return parts.password
    password = environ.get(PASSWORD_VARIABLE)
    return password if password is not None else lab_password(parts.hostname, parts.port)
