"""The broker endpoints a Kafka response hands out, and the same response with each replaced by
the proxy's own address for that broker (the fronting proxy: :mod:`eoslab.proxy.fronting`).

A client learns where the brokers are from three answers only: Metadata (its brokers),
FindCoordinator (the coordinator: top-level node_id/host/port up to v3, one per key in
``coordinators`` from v4) and DescribeCluster (its brokers). An endpoint is any entity of such
a response, at its top level or in one of its arrays, with a ``host``, a ``port`` and a node id
(``node_id``, ``broker_id``). A coordinator not found (node id -1, empty host) is no endpoint.
DescribeCluster asked for the controllers (``endpoint_type`` 2, KIP-919) names controller
listeners, which no proxy route forwards to: left as it is (:class:`ControllerEndpointsError`);
so is every DescribeQuorum answer (v2 names each voter's controller listeners, KIP-853): a
client reads them, it never connects to them through a broker's listener.

Pure logic on kio entities: decoding and encoding are :mod:`eoslab.proxy.faults.results`'.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.serial._introspect import EntityTupleField, classify_field

from eoslab.kafka_api import api_name
from eoslab.proxy.faults.results import UnencodableError, decode_response, frame_of, schema
from eoslab.settings import HostPort

METADATA, FIND_COORDINATOR, DESCRIBE_QUORUM, DESCRIBE_CLUSTER = 3, 10, 55, 60
ENDPOINT_APIS = frozenset({METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER})
"""The APIs whose answers hand out broker endpoints: rewritten."""
CONTROLLER_APIS = frozenset({DESCRIBE_QUORUM})
"""The APIs whose answers hand out controller endpoints only: left as they are, counted."""
NODE_ID_FIELDS = ("node_id", "broker_id")
CONTROLLERS = 2
"""DescribeCluster's endpoint_type for controller endpoints."""


class ControllerEndpointsError(UnencodableError):
    """A DescribeCluster answer naming controllers: no route forwards to them."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    node_id: int
    address: HostPort


@dataclass(frozen=True, slots=True)
class EndpointAnswer:
    """A decoded response that hands out endpoints, ready to be re-encoded with others."""

    header: Any
    body: Any
    endpoints: tuple[Endpoint, ...]

    def rewritten(self, addresses: Mapping[int, HostPort]) -> bytes:
        """The response frame (size prefix included) with every endpoint at
        ``addresses[node_id]``."""
        return frame_of(self.header, _replaced(self.body, addresses))


def endpoint_answer(frame: bytes | memoryview, api_key: int, version: int) -> EndpointAnswer:
    """The endpoints of a response frame (size prefix included) of an ENDPOINT_APIS API.
    UnencodableError for a version the proxy cannot decode or encode, or a body kio cannot
    parse; ControllerEndpointsError for DescribeCluster's controllers and any CONTROLLER_APIS
    answer."""
    if api_key in CONTROLLER_APIS:
        raise ControllerEndpointsError(f"{api_name(api_key)} v{version} (controllers)")
    found = schema(api_key, version)
    if found is None:
        raise UnencodableError(f"{api_name(api_key)} v{version}")
    header, body = decode_response(frame, found)
    if getattr(body, "endpoint_type", None) == CONTROLLERS:
        raise ControllerEndpointsError(f"{api_name(api_key)} v{version} (controllers)")
    return EndpointAnswer(header, body, tuple(_endpoints(body)))


def _endpoints(body: Any) -> list[Endpoint]:
    return [endpoint for entity in _holders(body) if (endpoint := _endpoint(entity)) is not None]


def _holders(body: Any) -> list[Any]:
    """The response and the entries of its arrays: where endpoints are."""
    holders = [body]
    for field in dataclasses.fields(body):
        if isinstance(classify_field(field), EntityTupleField):
            holders += getattr(body, field.name) or ()
    return holders


def _node_id_field(entity: Any) -> str | None:
    names = {field.name for field in dataclasses.fields(entity)}
    if not {"host", "port"} <= names:
        return None
    return next((name for name in NODE_ID_FIELDS if name in names), None)


def _endpoint(entity: Any) -> Endpoint | None:
    node_field = _node_id_field(entity)
    if node_field is None:
        return None
    node_id = int(getattr(entity, node_field))
    if node_id < 0 or not entity.host:
        return None
    return Endpoint(node_id, HostPort(entity.host, int(entity.port)))


def _replaced(body: Any, addresses: Mapping[int, HostPort]) -> Any:
    changes: dict[str, Any] = {}
    for field in dataclasses.fields(body):
        if isinstance(classify_field(field), EntityTupleField) and getattr(body, field.name):
            entries = getattr(body, field.name)
            changes[field.name] = tuple(_at(entry, addresses) for entry in entries)
    return _at(dataclasses.replace(body, **changes), addresses)


def _at(entity: Any, addresses: Mapping[int, HostPort]) -> Any:
    """``entity`` at its node's new address, if it is an endpoint."""
    endpoint = _endpoint(entity)
    if endpoint is None:
        return entity
    address = addresses[endpoint.node_id]
    port_type = type(entity.port)
    return dataclasses.replace(entity, host=address.host, port=port_type(address.port))
