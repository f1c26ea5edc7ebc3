"""ListOffsets and DeleteRecords: reading and moving a partition's offset bounds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from kio.schema.errors import ErrorCode

from eoslab.refbroker.apis.base import (
    READ_COMMITTED,
    ApiHandler,
    RequestContext,
    topics_response,
)
from eoslab.refbroker.internal_topics import is_internal
from eoslab.refbroker.log_manager import UnknownTopicOrPartitionError
from eoslab.refbroker.partition_log import LEADER_EPOCH, OffsetOutOfRangeError, PartitionLog

EARLIEST_TIMESTAMP = -2
EARLIEST_LOCAL_TIMESTAMP = -4
"""KIP-405's 'earliest local': without tiered storage the same as earliest."""


def _per_partition(
    ctx: RequestContext,
    topic: str,
    partition: int,
    action: Callable[[PartitionLog], dict[str, Any]],
) -> dict[str, Any]:
    """Run `action` on the partition; map the storage layer's exceptions to error codes."""
    try:
        plog = ctx.broker.storage.partition(topic, partition)
        return {"error_code": ErrorCode.none, **action(plog)}
    except UnknownTopicOrPartitionError:
        return {"error_code": ErrorCode.unknown_topic_or_partition}
    except OffsetOutOfRangeError:
        return {"error_code": ErrorCode.offset_out_of_range}


class ListOffsetsHandler(ApiHandler):
    api_key = 2
    min_version = 1  # v0 returns offset lists (old_style_offsets); no client we serve uses it
    max_version = 8
    entities = ("ListOffsetsTopicResponse", "ListOffsetsPartitionResponse")
    defaults: ClassVar[dict[str, Any]] = {"timestamp": -1, "offset": -1}

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED

        def answer(topic: str, part: Any) -> dict[str, Any]:
            timestamp = part.timestamp
            wanted = EARLIEST_TIMESTAMP if timestamp == EARLIEST_LOCAL_TIMESTAMP else timestamp

            def lookup(plog: PartitionLog) -> dict[str, Any]:
                offset, found_ts = plog.list_offset(wanted, read_committed)
                return {"offset": offset, "timestamp": found_ts, "leader_epoch": LEADER_EPOCH}

            return _per_partition(ctx, topic, part.partition_index, lookup)

        return topics_response(ctx, request, self.entities, self.defaults, answer)

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return topics_response(
            ctx, request, self.entities, self.defaults, lambda _t, _p: {"error_code": error}
        )


class DeleteRecordsHandler(ApiHandler):
    """The KIP-360 path: moving the log start can remove a producer's state. An internal topic
    that exists is refused INVALID_TOPIC_EXCEPTION, as Kafka's ReplicaManager refuses it."""

    api_key = 21
    min_version = 0
    max_version = 2
    entities = ("DeleteRecordsTopicResult", "DeleteRecordsPartitionResult")
    defaults: ClassVar[dict[str, Any]] = {"low_watermark": -1}

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        def answer(topic: str, part: Any) -> dict[str, Any]:
            def delete(plog: PartitionLog) -> dict[str, Any]:
                if is_internal(topic):
                    return {"error_code": ErrorCode.invalid_topic_exception}
                return {"low_watermark": plog.delete_records(part.offset)}

            return _per_partition(ctx, topic, part.partition_index, delete)

        return topics_response(ctx, request, self.entities, self.defaults, answer)

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return topics_response(
            ctx, request, self.entities, self.defaults, lambda _t, _p: {"error_code": error}
        )
