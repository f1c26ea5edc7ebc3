"""Is a service up? Cheap probes, each answering quickly with True/False or facts."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from confluent_kafka.admin import AdminClient

from eoslab.runtime.topology import HOST


def port_open(port: int, host: str = HOST, timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def port_free(port: int, host: str = HOST) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def zookeeper_ok(port: int) -> bool:
    """ZooKeeper's `ruok` four-letter word answers `imok` once it serves."""
    try:
        with socket.create_connection((HOST, port), timeout=1.0) as conn:
            conn.sendall(b"ruok")
            return conn.recv(4) == b"imok"
    except OSError:
        return False


def admin(bootstrap: str, timeout_ms: int = 5000) -> AdminClient:
    return AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "socket.timeout.ms": timeout_ms,
            "socket.connection.setup.timeout.ms": timeout_ms,
            "log_level": 0,
        }
    )


def metadata_brokers(bootstrap: str, timeout_s: float = 3.0) -> set[int]:
    """Broker ids in a metadata response obtained through `bootstrap`; empty when unreachable."""
    try:
        return set(admin(bootstrap).list_topics(timeout=timeout_s).brokers)
    except Exception:
        return set()


def wait_until(condition: Callable[[], bool], timeout_s: float, interval_s: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)
