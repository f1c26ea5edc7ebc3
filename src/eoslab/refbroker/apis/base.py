"""What every API handler looks like, and what it gets to see of the request."""

from __future__ import annotations

import abc
import datetime
from dataclasses import dataclass
from typing import Any, ClassVar

from kio.schema.errors import ErrorCode

from eoslab.refbroker.broker import ReferenceBroker

NO_THROTTLE = datetime.timedelta(0)


@dataclass(frozen=True)
class RequestContext:
    broker: ReferenceBroker
    api_version: int
    response_type: type
    """The kio response class of this API at the request's version."""
    client_id: str | None


class ApiHandler(abc.ABC):
    """One Kafka API: the versions we advertise, how to serve it, how to refuse it."""

    api_key: ClassVar[int]
    min_version: ClassVar[int]
    max_version: ClassVar[int]

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    @abc.abstractmethod
    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        """The response entity, or None when the protocol says not to answer (acks=0)."""

    @abc.abstractmethod
    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        """A response that refuses the whole request with `error`, applying nothing."""
