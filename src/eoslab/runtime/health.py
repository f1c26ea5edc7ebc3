"""Is a service up? Cheap probes, each answering quickly with True or False."""

from __future__ import annotations

import socket

from eoslab.settings import HOST


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
