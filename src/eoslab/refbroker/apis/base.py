"""What every API handler looks like, and what it gets to see of the request."""

from __future__ import annotations

import abc
import datetime
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from kio.schema.errors import ErrorCode

from eoslab.refbroker.broker import ReferenceBroker
from eoslab.refbroker.protocol import build, nested

NO_THROTTLE = datetime.timedelta(0)
READ_COMMITTED = 1
"""Fetch's and ListOffsets' isolation_level for transactional reads (0: read_uncommitted)."""


@dataclass(frozen=True)
class RequestContext:
    broker: ReferenceBroker
    api_version: int
    response_type: type
    """The kio response class of this API at the request's version."""
    client_id: str | None
    client_host: str = ""
    """The client's address as Kafka shows it in DescribeGroups: "/127.0.0.1"."""


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


class ErrorCodeHandler(ApiHandler):
    """An API whose response is a top-level error code (and the throttle time) only."""

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return build(ctx.response_type, throttle_time=NO_THROTTLE, error_code=error)


PartitionAnswer = Callable[[str, Any], dict[str, Any]]
"""(topic name, request partition) -> the partition response's fields."""


def request_partitions(topic: Any) -> Iterable[tuple[int, Any]]:
    """(index, request partition) of a request topic that lists partition entities."""
    return ((part.partition_index, part) for part in topic.partitions)


def topics_response(
    ctx: RequestContext,
    request: Any,
    entity_names: tuple[str, str],
    defaults: dict[str, Any],
    answer: PartitionAnswer,
    *,
    partitions: Callable[[Any], Iterable[tuple[int, Any]]] = request_partitions,
) -> object:
    """The topics -> partitions response shape ListOffsets, DeleteRecords and
    DescribeProducers share: one partition response per requested partition."""
    topic_type, partition_type = (nested(ctx.response_type, name) for name in entity_names)
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(
                topic_type,
                name=topic.name,
                partitions=tuple(
                    build(
                        partition_type,
                        partition_index=index,
                        **{**defaults, **answer(topic.name, part)},
                    )
                    for index, part in partitions(topic)
                ),
            )
            for topic in request.topics
        ),
    )
