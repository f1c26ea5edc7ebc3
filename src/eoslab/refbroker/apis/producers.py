"""InitProducerId (idempotent producers only) and DescribeProducers."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from eoslab.refbroker.apis.base import (
    NO_THROTTLE,
    ApiHandler,
    PartitionAnswer,
    RequestContext,
    topics_response,
)
from eoslab.refbroker.log_manager import UnknownTopicOrPartitionError
from eoslab.refbroker.protocol import build, nested

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


class InitProducerIdHandler(ApiHandler):
    """Kafka 3.9's TransactionCoordinator.handleInitProducerId for a null transactional id:
    always a fresh producer id with epoch 0, whatever id/epoch the request carries.

    Transactions are not implemented. An empty transactional id gets INVALID_REQUEST as in
    Kafka; any other one gets UNSUPPORTED_VERSION: non-retriable, so the Java client fails
    at once with "Unexpected error in InitProducerIdResponse" instead of looping on a
    retriable COORDINATOR_NOT_AVAILABLE until max.block.ms. (FindCoordinator, which a
    transactional client sends first, names this broker for a transactional id too.)
    """

    api_key = 22
    min_version = 0
    max_version = 5

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        if request.transactional_id is not None:
            empty = request.transactional_id == ""
            error = ErrorCode.invalid_request if empty else ErrorCode.unsupported_version
            return self.reject(request, ctx, error)
        producer_id = ctx.broker.producer_ids.generate_producer_id()
        return self._response(ctx, ErrorCode.none, producer_id, 0)

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return self._response(ctx, error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)

    @staticmethod
    def _response(ctx: RequestContext, error: ErrorCode, producer_id: int, epoch: int) -> object:
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=error,
            producer_id=producer_id,
            producer_epoch=epoch,
        )


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
