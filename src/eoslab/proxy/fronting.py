"""Fronting: the chaos proxy in front of a cluster it does not configure (``eoslab chaos
front``, external runs with proxy faults).

Each broker advertises its own address, so after the first Metadata answer a client would
connect to the brokers directly, around the proxy. The fronting proxy rewrites every endpoint
the cluster hands out (:mod:`eoslab.proxy.endpoints`) to the proxy's own route for that broker,
``broker-<node id>``: a listener on a free local port forwarding to the address the broker
advertised. A broker first named in an answer gets its route before the rewritten answer goes
out, so a client never holds an address the proxy does not listen on.

What it did is in the control API's counters (``fronting``): the answers rewritten per API,
the addresses handed out per route, and what it passed untouched (versions it cannot encode,
the answers naming controllers: DescribeCluster's for controllers, DescribeQuorum's). With the routes' connection counts they show that every client
connection crossed the proxy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable

from eoslab.kafka_api import api_name
from eoslab.proxy.endpoints import (
    CONTROLLER_APIS,
    ENDPOINT_APIS,
    ControllerEndpointsError,
    Endpoint,
    endpoint_answer,
)
from eoslab.proxy.faults.results import UnencodableError
from eoslab.settings import HostPort

BROKER_ROUTE = "broker-"
BOOTSTRAP_ROUTE = "bootstrap-"

OpenRoute = Callable[[str, HostPort], Awaitable[HostPort]]
"""(route name, upstream) -> the route's listen address, the route opened if it is new."""


def broker_route(node_id: int) -> str:
    """The fronting proxy's route to the broker with this node id."""
    return f"{BROKER_ROUTE}{node_id}"


def bootstrap_route(index: int) -> str:
    """The fronting proxy's route to the user's ``index``-th bootstrap server (from 1)."""
    return f"{BOOTSTRAP_ROUTE}{index}"


class Fronting:
    """Rewrites the endpoints of the answers that hand them out, opening routes as needed."""

    def __init__(self, open_route: OpenRoute) -> None:
        self._open_route = open_route
        self.rewritten_answers: Counter[str] = Counter()
        self.handed_out: dict[str, str] = {}
        """Route -> the address clients were given for it (its listener)."""
        self.upstreams: dict[str, str] = {}
        """Route -> the address its broker advertises, as last named (what it forwards new
        connections to)."""
        self.unencodable: Counter[str] = Counter()
        self.controllers = 0

    @staticmethod
    def rewrites(api_key: int) -> bool:
        """Whether the answers of this API go through :meth:`rewritten` (held whole)."""
        return api_key in ENDPOINT_APIS or api_key in CONTROLLER_APIS

    async def rewritten(
        self, frame: bytes | memoryview, api_key: int, version: int
    ) -> bytes | None:
        """The response frame with every endpoint at the proxy's route for its broker; None
        when it passes untouched (counted: a version the proxy cannot encode, controllers)."""
        try:
            answer = endpoint_answer(frame, api_key, version)
        except ControllerEndpointsError:
            self.controllers += 1
            return None
        except UnencodableError:
            self.unencodable[f"{api_name(api_key)} v{version}"] += 1
            return None
        addresses = {
            endpoint.node_id: await self._route_for(endpoint) for endpoint in answer.endpoints
        }
        self.rewritten_answers[api_name(api_key)] += 1
        return answer.rewritten(addresses)

    async def _route_for(self, endpoint: Endpoint) -> HostPort:
        route = broker_route(endpoint.node_id)
        listen = await self._open_route(route, endpoint.address)
        self.handed_out[route] = str(listen)
        self.upstreams[route] = str(endpoint.address)
        return listen

    def snapshot(self) -> dict[str, object]:
        return {
            "rewritten": dict(self.rewritten_answers),
            "handed_out": dict(self.handed_out),
            "upstreams": dict(self.upstreams),
            "unencodable": dict(self.unencodable),
            "controllers": self.controllers,
        }
