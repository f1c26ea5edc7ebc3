"""Ports picked for a server about to listen: never one a connection may take as its source."""

from __future__ import annotations

import socket

from eoslab.runtime.ports import above_ephemeral_range, free_port


def test_the_ports_picked_lie_above_the_ephemeral_range_and_bind() -> None:
    ports = above_ephemeral_range()
    assert ports, "this machine's ephemeral range reaches 65535: nothing to pick from above it"
    picked = [free_port() for _ in range(20)]
    assert len(set(picked)) == len(picked)
    assert all(port in ports for port in picked)
    for port in picked:
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))


def test_a_port_a_socket_holds_is_never_picked() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", free_port()))
        taken = held.getsockname()[1]
        assert taken not in {free_port() for _ in above_ephemeral_range()}
