"""Which client a run's roles use, made ready before the run starts: :func:`prepare` turns a
client's name into the :class:`~eoslab.clients.ClientLaunch` every session gets, installing or
building it on first use (one line said), refusing what cannot be had; :func:`check_config`
refuses, before anything starts, a librdkafka property the client has no equivalent for."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from eoslab.clients import LIBRDKAFKA, ClientLaunch, ClientRef, parse_client
from eoslab.workload.drivers import franz_go, java, librdkafka
from eoslab.workload.drivers.franz_go import config as franz_go_config
from eoslab.workload.drivers.java import config as java_config


def _stderr(line: str) -> None:
    print(f"eoslab: {line}", file=sys.stderr, flush=True)


def default_client() -> ClientRef:
    """The workload's own librdkafka (a run that names no client)."""
    return ClientRef(LIBRDKAFKA, librdkafka.own_version())


def resolve(text: str | None) -> ClientRef:
    """A client's name (None: the default) as a ClientRef; ClientError when malformed."""
    return default_client() if text is None else parse_client(text)


def check_config(
    ref: ClientRef, producer: dict[str, Any], consumer: dict[str, Any] | None = None
) -> None:
    """Whether the client takes the run's librdkafka properties (a driver translates them):
    ClientError naming the first it has no equivalent for."""
    if ref.family == LIBRDKAFKA:
        return
    config = java_config if ref.family == "java" else franz_go_config
    config.producer(producer)
    if consumer is not None:
        config.consumer(consumer)


def prepare(ref: ClientRef, say: Callable[[str], None] = _stderr) -> ClientLaunch:
    """The client ready to run: ClientError (one line) when it cannot be had."""
    if ref.family == "java":
        return java.prepare(ref.version, say)
    if ref.family == "franz-go":
        return franz_go.prepare(ref.version, say)
    return librdkafka.prepare(ref.version, say)
