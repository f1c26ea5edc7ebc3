"""DescribeProducers: the producer state of partitions (open transactions included)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from eoslab.refbroker.apis.base import (
    ApiHandler,
    PartitionAnswer,
    RequestContext,
    topics_response,
)
from eoslab.refbroker.log_manager import UnknownTopicOrPartitionError
from eoslab.refbroker.protocol import build, nested


class DescribeProducersHandler(ApiHandler):
    api_key = 61
    min_version = 0
    max_version = 0

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        state_type = nested(ctx.response_type, "ProducerState")

        def describe(topic: str, index: int) -> dict[str, Any]:
            try:
                views = ctx.broker.storage.partition(topic, index).active_producers()
            except UnknownTopicOrPartitionError:
                return {"error_code": ErrorCode.unknown_topic_or_partition}
            rows: tuple[object, ...] = tuple(
                build(
                    state_type,
                    producer_id=v.producer_id,
                    producer_epoch=v.producer_epoch,
                    last_sequence=v.last_sequence,
                    last_timestamp=v.last_timestamp,
                    coordinator_epoch=v.coordinator_epoch,
                    current_txn_start_offset=v.current_txn_start_offset,
                )
                for v in views
            )
            return {"error_code": ErrorCode.none, "active_producers": rows}

        return self._response(ctx, request, describe)

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return self._response(ctx, request, lambda _topic, _index: {"error_code": error})

    @staticmethod
    def _response(ctx: RequestContext, request: Any, describe: PartitionAnswer) -> object:
        return topics_response(
            ctx,
            request,
            ("TopicResponse", "PartitionResponse"),
            {"error_message": None, "active_producers": ()},
            describe,
            partitions=lambda topic: ((index, index) for index in topic.partition_indexes),
        )
