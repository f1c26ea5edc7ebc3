"""ApiVersions: the version ranges we advertise, and Kafka's fallback for versions we lack."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kio.schema.api_versions.v0 import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode

from eoslab.refbroker.apis.base import NO_THROTTLE, ApiHandler, RequestContext
from eoslab.refbroker.protocol import build, nested


class ApiVersionsHandler(ApiHandler):
    api_key = 18
    min_version = 0
    max_version = 3

    def __init__(self, handlers: Mapping[int, ApiHandler]) -> None:
        self._handlers = handlers

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        return self._response(ctx.response_type, ErrorCode.none)

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return self._response(ctx.response_type, error)

    def unsupported_version_response(self) -> object:
        """What Kafka sends a client that asked at a version we don't know (librdkafka starts
        at v3): a v0 response with UNSUPPORTED_VERSION and our ranges, so it can retry lower."""
        return self._response(ApiVersionsResponseV0, ErrorCode.unsupported_version)

    def _response(self, response_type: type, error: ErrorCode) -> object:
        version_type = nested(response_type, "ApiVersion")
        return build(
            response_type,
            error_code=error,
            throttle_time=NO_THROTTLE,
            api_keys=tuple(
                build(
                    version_type, api_key=key, min_version=h.min_version, max_version=h.max_version
                )
                for key, h in sorted(self._handlers.items())
            ),
        )
