"""The chaos proxy: one listener per route (broker), every connection forwarded to its upstream."""

import asyncio
import contextlib
import itertools
import socket
import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from eoslab.control.fault_log import FaultLog
from eoslab.proxy.connection import (
    STREAM_LIMIT,
    BlackholeGate,
    ProxiedConnection,
    ProxyServices,
)
from eoslab.proxy.faults.active import ActiveFault
from eoslab.proxy.faults.reset import ResetSpec
from eoslab.proxy.faults.spec import ANY, FaultSpec
from eoslab.proxy.faults.table import FaultTable
from eoslab.proxy.fronting import Fronting
from eoslab.proxy.late_delivery import LateCourier
from eoslab.proxy.traffic_counters import TrafficCounters
from eoslab.settings import HOST, HostPort


@dataclass(frozen=True, slots=True)
class Route:
    """NAME=LISTEN=UPSTREAM, e.g. kafka-1=127.0.0.1:9091=127.0.0.1:29091."""

    name: str
    listen: HostPort
    upstream: HostPort

    @classmethod
    def parse(cls, text: str) -> "Route":
        parts = text.split("=")
        if len(parts) != 3 or not parts[0] or parts[0] == ANY:
            raise ValueError(f"route {text!r} is not NAME=LISTEN_HOST:PORT=UPSTREAM_HOST:PORT")
        return cls(parts[0], HostPort.parse(parts[1]), HostPort.parse(parts[2]))


class ListenError(OSError):
    """A route's listen address cannot be bound (typically: the port is in use)."""


class ChaosProxy:
    def __init__(
        self, routes: Sequence[Route], seed: int, fault_log: FaultLog, *, front: bool = False
    ) -> None:
        """``front``: rewrite the broker endpoints in answers to routes of the proxy's own,
        opened as brokers appear (:mod:`eoslab.proxy.fronting`)."""
        names = [route.name for route in routes]
        if len(set(names)) != len(names):
            raise ValueError(f"route names must be unique: {names}")
        self.routes = {route.name: route for route in routes}
        self.faults = FaultTable(names, seed)
        self.counters = TrafficCounters(tuple(names))
        self.fault_log = fault_log
        self.fronting = Fronting(self.open_route) if front else None
        self._services = ProxyServices(
            self.faults, self.counters, fault_log, BlackholeGate(self.faults), self.fronting
        )
        self._opening = asyncio.Lock()
        self.late = LateCourier(
            {route.name: route.upstream for route in routes}, self.faults, fault_log
        )
        self._servers: dict[str, asyncio.Server] = {}
        self._connections: set[ProxiedConnection] = set()
        self._connection_ids = itertools.count(1)
        self._handlers: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Bind every route; on a failure, nothing stays bound and ListenError names the port."""
        try:
            for route in self.routes.values():
                self._servers[route.name] = await self._listen(route)
        except ListenError:
            await self.stop()
            raise

    async def open_route(self, name: str, upstream: HostPort) -> HostPort:
        """The listen address of route ``name``; a new route listens on a free local port and
        forwards to ``upstream`` (a broker the fronted cluster names for the first time), a
        route whose broker moved forwards its new connections to where it is now."""
        async with self._opening:
            if name not in self._servers:
                route = Route(name, HostPort(HOST, 0), upstream)
                self.routes[name] = route
                self.faults.add_route(name)
                self.counters.add_route(name)
                self.late.add_upstream(name, upstream)
                self._servers[name] = await self._listen(route)
            elif self.routes[name].upstream != upstream:
                self.routes[name] = Route(name, self.routes[name].listen, upstream)
                self.late.add_upstream(name, upstream)
        return self.listen_address(name)

    def listen_address(self, route: str) -> HostPort:
        """The bound address of a route (the actual port when the route asked for port 0)."""
        host, port = self._servers[route].sockets[0].getsockname()[:2]
        return HostPort(host, port)

    async def stop(self) -> None:
        for server in self._servers.values():
            server.close()
        for connection in list(self._connections):
            connection.reset()
        for server in self._servers.values():
            await server.wait_closed()
        self._servers.clear()
        await self.late.stop()
        if self._handlers:
            await asyncio.gather(*self._handlers, return_exceptions=True)

    def add_fault(self, spec: FaultSpec | dict[str, object]) -> ActiveFault:
        fault = self.faults.add(spec)
        self.late.attach(fault)
        if isinstance(fault.spec, ResetSpec) and not fault.spec.per_frame():
            for connection in list(self._connections):
                if fault.concerns_route(connection.route):
                    fault.acted_on_connection(connection.id)
                    self.fault_log.record(**fault.connection_entry(connection.route, connection.id))
                    connection.reset()
        return fault

    async def _listen(self, route: Route) -> asyncio.Server:
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            self._handlers.add(task)
            try:
                await self._serve(self.routes[route.name], reader, writer)
            finally:
                self._handlers.discard(task)

        try:
            return await asyncio.start_server(
                accept, route.listen.host, route.listen.port, limit=STREAM_LIMIT
            )
        except OSError as error:
            raise ListenError(
                error.errno,
                f"route {route.name}: cannot listen on {route.listen}: {error.strerror}",
            ) from error

    async def _serve(
        self, route: Route, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        connection_id = next(self._connection_ids)
        self.counters.connection_opened(route.name)
        try:
            await self._stall_while_blackholed(route.name, connection_id)
            try:
                upstream = await asyncio.open_connection(
                    route.upstream.host, route.upstream.port, limit=STREAM_LIMIT
                )
            except OSError as error:
                print(
                    f"chaos proxy: {route.name}: upstream {route.upstream} unreachable: {error}",
                    file=sys.stderr,
                )
                refuse(writer)
                return
            connection = ProxiedConnection(
                connection_id, route.name, (reader, writer), upstream, self._services
            )
            self._connections.add(connection)
            try:
                await connection.run()
            finally:
                self._connections.discard(connection)
        finally:
            self.counters.connection_closed(route.name)

    async def _stall_while_blackholed(self, route: str, connection_id: int) -> None:
        """A new connection to a partitioned broker is accepted, then waits for the partition."""
        if self.faults.blackhole_end(route) is None:
            return
        for fault in self.faults.blackholes(route):
            fault.acted_on_connection(connection_id)
            self.fault_log.record(**fault.connection_entry(route, connection_id))
        await self._services.gate.wait_open(route)


def refuse(writer: asyncio.StreamWriter) -> None:
    """Close an accepted connection with a TCP reset: as near as the proxy comes to the refusal
    a dead broker's own port gives. A clean close instead is a first read of nothing, which a
    client may take for the broker's verdict on its TLS or SASL and give up for good (franz-go
    v1.22.2: a fatal producer id error, its reference broker restarting, `make conformance`
    2026-12-07), where a reset or a refusal is the network's doing, retried."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
