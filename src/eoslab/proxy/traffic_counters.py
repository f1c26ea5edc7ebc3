"""Frames and bytes through the proxy, per route, API and direction.

Updated on every frame, so a plain list of four ints per (route, API) rather than objects.
"""

from eoslab.kafka_api import api_name
from eoslab.proxy.faults.spec import Direction

REQUEST_FRAMES, REQUEST_BYTES, RESPONSE_FRAMES, RESPONSE_BYTES = range(4)
UNMATCHED_RESPONSE = -1
_FIELDS = ("request_frames", "request_bytes", "response_frames", "response_bytes")


class TrafficCounters:
    def __init__(self, routes: tuple[str, ...]) -> None:
        self._by_route: dict[str, dict[int, list[int]]] = {route: {} for route in routes}
        self._connections: dict[str, list[int]] = {route: [0, 0] for route in routes}

    def add_route(self, route: str) -> None:
        self._by_route[route] = {}
        self._connections[route] = [0, 0]

    def frame(self, route: str, api_key: int, direction: Direction, size: int) -> None:
        """Count one frame; `api_key` is UNMATCHED_RESPONSE for a response to no known request."""
        per_api = self._by_route[route]
        counts = per_api.get(api_key)
        if counts is None:
            counts = per_api[api_key] = [0, 0, 0, 0]
        index = REQUEST_FRAMES if direction is Direction.REQUEST else RESPONSE_FRAMES
        counts[index] += 1
        counts[index + 1] += size

    def connection_opened(self, route: str) -> None:
        self._connections[route][0] += 1
        self._connections[route][1] += 1

    def connection_closed(self, route: str) -> None:
        self._connections[route][1] -= 1

    def snapshot(self) -> dict[str, object]:
        """{route: {"connections": {...}, "apis": {api name: {request_frames: ...}}}}"""
        return {
            route: {
                "connections": dict(
                    zip(("accepted", "open"), self._connections[route], strict=True)
                ),
                "apis": {
                    _label(api_key): dict(zip(_FIELDS, counts, strict=True))
                    for api_key, counts in sorted(per_api.items())
                },
            }
            for route, per_api in self._by_route.items()
        }


def _label(api_key: int) -> str:
    return "unmatched" if api_key == UNMATCHED_RESPONSE else api_name(api_key)
