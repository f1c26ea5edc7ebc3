"""The transaction APIs, as Kafka 3.9's KafkaApis hands them to its TransactionCoordinator (the
rules are in transaction_coordinator.py): InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn, DescribeTransactions, ListTransactions. TxnOffsetCommit is the group coordinator's
(groups/handlers.py).

The conversions Kafka makes for old versions: PRODUCER_FENCED (KIP-588) is answered as
INVALID_PRODUCER_EPOCH to InitProducerId before v4 and to AddPartitionsToTxn, AddOffsetsToTxn
and EndTxn before v2; InitProducerId v3+ carries the producer id and epoch the producer had
(KIP-360: both -1, or neither).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from eoslab.refbroker.apis.base import NO_THROTTLE, ApiHandler, ErrorCodeHandler, RequestContext
from eoslab.refbroker.internal_topics import is_internal, offsets_topic_partition
from eoslab.refbroker.protocol import build, millis, nested
from eoslab.refbroker.transactions.transaction_coordinator import InitProducerIdResult
from eoslab.refbroker.transactions.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
)

E = ErrorCode
EPOCH_ZERO = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def fenced_for(error: ErrorCode, version: int, first_fenced_version: int) -> ErrorCode:
    """PRODUCER_FENCED as an older client understands it: INVALID_PRODUCER_EPOCH."""
    if error is E.producer_fenced and version < first_fenced_version:
        return E.invalid_producer_epoch
    return error


class InitProducerIdHandler(ApiHandler):
    """A null transactional id: an idempotent producer, a fresh producer id at epoch 0 whatever
    the request carries (handleInitProducerId); any other id: the transaction coordinator."""

    api_key = 22
    min_version = 0
    max_version = 5

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        producer_id = getattr(request, "producer_id", NO_PRODUCER_ID)
        epoch = getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)
        if (producer_id == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
            return self.reject(request, ctx, E.invalid_request)
        if request.transactional_id is None:
            generated = ctx.broker.producer_ids.generate_producer_id()
            return self._response(ctx, InitProducerIdResult(E.none, generated, 0))
        result = ctx.broker.transactions.handle_init_producer_id(
            request.transactional_id,
            millis(request.transaction_timeout),
            None if producer_id == NO_PRODUCER_ID else (producer_id, epoch),
        )
        return self._response(ctx, result)

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return self._response(ctx, InitProducerIdResult(error))

    @staticmethod
    def _response(ctx: RequestContext, result: InitProducerIdResult) -> object:
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=fenced_for(result.error, ctx.api_version, 4),
            producer_id=result.producer_id,
            producer_epoch=result.producer_epoch,
        )


class AddPartitionsToTxnHandler(ApiHandler):
    """v0-3, the clients' versions (v4-5 are broker to broker). Any partition that does not exist
    fails the whole request: its error on it, OPERATION_NOT_ATTEMPTED on the others."""

    api_key = 24
    min_version = 0
    max_version = 3

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        wanted = _requested(request)
        known = ctx.broker.storage.topics()
        refused = {
            tp: E.topic_authorization_failed  # Kafka's clients may not write internal topics
            if is_internal(tp[0])
            else E.unknown_topic_or_partition
            for tp in wanted
            if is_internal(tp[0]) or not 0 <= tp[1] < known.get(tp[0], 0)
        }
        if refused:
            errors = {tp: refused.get(tp, E.operation_not_attempted) for tp in wanted}
            return self._response(ctx, request, errors)
        error = ctx.broker.transactions.handle_add_partitions(
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            wanted,
        )
        return self.reject(request, ctx, fenced_for(error, ctx.api_version, 2))

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return self._response(ctx, request, dict.fromkeys(_requested(request), error), error)

    @staticmethod
    def _response(
        ctx: RequestContext,
        request: Any,
        errors: Mapping[TopicPartition, ErrorCode],
        error: ErrorCode = E.none,
    ) -> object:
        """The v0-3 per-partition results; v4+ (broker to broker, only ever refused) carry the
        refusal in their top-level error code and no transactions."""
        topic_type = nested(ctx.response_type, "AddPartitionsToTxnTopicResult")
        partition_type = nested(ctx.response_type, "AddPartitionsToTxnPartitionResult")
        by_topic: dict[str, list[int]] = {}
        for topic, partition in errors:
            by_topic.setdefault(topic, []).append(partition)
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=error,
            results_by_transaction=(),
            results_by_topic_v3_and_below=tuple(
                build(
                    topic_type,
                    name=topic,
                    results_by_partition=tuple(
                        build(
                            partition_type,
                            partition_index=p,
                            partition_error_code=errors[topic, p],
                        )
                        for p in partitions
                    ),
                )
                for topic, partitions in by_topic.items()
            ),
        )


def _requested(request: Any) -> list[TopicPartition]:
    return list(
        dict.fromkeys(
            (t.name, p)
            for t in getattr(request, "v3_and_below_topics", ())  # v4+: batched, not served
            for p in t.partitions
        )
    )


class AddOffsetsToTxnHandler(ErrorCodeHandler):
    """The group's __consumer_offsets partition joins the transaction, so that TxnOffsetCommit
    may commit the group's offsets in it."""

    api_key = 25
    min_version = 0
    max_version = 4

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        error = ctx.broker.transactions.handle_add_partitions(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            [offsets_topic_partition(request.group_id)],
        )
        return self.reject(request, ctx, fenced_for(error, ctx.api_version, 2))


class EndTxnHandler(ErrorCodeHandler):
    api_key = 26
    min_version = 0
    max_version = 4

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        error = ctx.broker.transactions.handle_end_txn(
            request.transactional_id, request.producer_id, request.producer_epoch, request.committed
        )
        return self.reject(request, ctx, fenced_for(error, ctx.api_version, 2))


class DescribeTransactionsHandler(ApiHandler):
    api_key = 65
    min_version = 0
    max_version = 0

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        state_type = nested(ctx.response_type, "TransactionState")
        topic_type = nested(ctx.response_type, "TopicData")
        described = []
        for transactional_id in request.transactional_ids:
            error, metadata = ctx.broker.transactions.handle_describe(transactional_id)
            if metadata is None:
                described.append(self._state(state_type, transactional_id, error))
                continue
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(metadata.partitions):
                by_topic.setdefault(topic, []).append(partition)
            described.append(
                build(
                    state_type,
                    error_code=error,
                    transactional_id=transactional_id,
                    transaction_state=str(metadata.state),
                    transaction_timeout=datetime.timedelta(milliseconds=metadata.timeout_ms),
                    transaction_start_time=EPOCH_ZERO
                    + datetime.timedelta(milliseconds=metadata.txn_start_ms),
                    producer_id=metadata.producer_id,
                    producer_epoch=metadata.producer_epoch,
                    topics=tuple(
                        build(topic_type, topic=t, partitions=tuple(p)) for t, p in by_topic.items()
                    ),
                )
            )
        return build(
            ctx.response_type, throttle_time=NO_THROTTLE, transaction_states=tuple(described)
        )

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        state_type = nested(ctx.response_type, "TransactionState")
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            transaction_states=tuple(
                self._state(state_type, t, error) for t in request.transactional_ids
            ),
        )

    @staticmethod
    def _state(state_type: type, transactional_id: str, error: ErrorCode) -> object:
        return build(
            state_type,
            error_code=error,
            transactional_id=transactional_id,
            transaction_state="",
            transaction_timeout=datetime.timedelta(0),
            transaction_start_time=EPOCH_ZERO,
            producer_id=0,
            producer_epoch=0,
            topics=(),
        )


class ListTransactionsHandler(ApiHandler):
    api_key = 66
    min_version = 0
    max_version = 1

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        unknown, listed = ctx.broker.transactions.handle_list(
            request.state_filters,
            request.producer_id_filters,
            getattr(request, "duration_filter", -1),
        )
        state_type = nested(ctx.response_type, "TransactionState")
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=E.none,
            unknown_state_filters=tuple(unknown),
            transaction_states=tuple(
                build(
                    state_type,
                    transactional_id=m.transactional_id,
                    producer_id=m.producer_id,
                    transaction_state=str(m.state),
                )
                for m in listed
            ),
        )

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=error,
            unknown_state_filters=(),
            transaction_states=(),
        )


TRANSACTION_HANDLERS: tuple[type[ApiHandler], ...] = (
    InitProducerIdHandler,
    AddPartitionsToTxnHandler,
    AddOffsetsToTxnHandler,
    EndTxnHandler,
    DescribeTransactionsHandler,
    ListTransactionsHandler,
)
