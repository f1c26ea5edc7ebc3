"""Loopback ports picked free for a process about to listen on them (the soak's servers, the
benchmark's reference broker, the tests' lone brokers and proxies).

The port the kernel hands out for ``bind(port 0)`` lies in its ephemeral range
(``ip_local_port_range``, 32768-60999 by default): between the probe closing it and the server
listening on it, an outgoing connection may take it as its source port, and the server fails
"address already in use" (the clean-clone run of stop 39: a lone proxy's control API, a soak's
proxy). A port above the range is never a connection's source. ``free_port`` picks one of those
that binds, walking the range from a start of its own per process (two calls in a row never
get the same port; two processes seldom look at the same ports); where the range leaves no
port above it, it falls back to ``bind(port 0)``.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
from pathlib import Path

HOST = "127.0.0.1"
HIGHEST = 65535
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def above_ephemeral_range() -> range:
    """The ports above the kernel's ephemeral range (empty where it cannot be read)."""
    try:
        _, last = (int(field) for field in EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        return range(0)
    return range(last + 1, HIGHEST + 1)


_PORTS = above_ephemeral_range()
_NEXT = itertools.count(random.Random(os.getpid()).randrange(len(_PORTS) or 1))


def free_port(host: str = HOST) -> int:
    """A port on ``host`` no socket is bound to, outside the ephemeral range where it can be."""
    for _ in _PORTS:
        port = _PORTS[next(_NEXT) % len(_PORTS)]
        with socket.socket() as probe:
            try:
                probe.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])
