"""Produce: one RecordBatch v2 per partition, handed to PartitionLog.append; the first
transactional batch of a producer in a partition is verified with the transaction coordinator
first (KIP-890 part 1, Kafka 3.9's transaction.partition.verification.enable=true), with
ReplicaManager's error mapping: INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v11) for a
partition not in the transaction, INVALID_PRODUCER_EPOCH for a fenced epoch, NOT_ENOUGH_REPLICAS
for the coordinator's retriable errors. An internal topic that exists is refused
INVALID_TOPIC_EXCEPTION, as Kafka's ReplicaManager refuses a client's append to one; a batch
larger than its topic's `max.message.bytes` (the broker's `message.max.bytes` unless the topic
sets it) is refused MESSAGE_TOO_LARGE.

Difference from Kafka: the batch is validated (CRC, offsets, sequences' sign) before the
verification; Kafka verifies first and validates the batch as it appends it, so a corrupt
transactional batch of an unverified producer gets the verification's error there and the
validation's here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from eoslab.clock import now_ms
from eoslab.refbroker.apis.base import NO_THROTTLE, ApiHandler, RequestContext
from eoslab.refbroker.batch_header import BatchHeader
from eoslab.refbroker.internal_topics import is_internal
from eoslab.refbroker.log_manager import UnknownTopicOrPartitionError
from eoslab.refbroker.partition_log import AppendResult
from eoslab.refbroker.producer_state import ProducerStateError
from eoslab.refbroker.protocol import build, nested

VALID_ACKS = (-1, 0, 1)
UNVERIFIED = frozenset(
    {
        ErrorCode.concurrent_transactions,
        ErrorCode.network_exception,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
    }
)
"""Verification errors older clients may not retry: Kafka answers NOT_ENOUGH_REPLICAS instead."""


class ProduceHandler(ApiHandler):
    api_key = 0
    min_version = 3  # v3 is the first with RecordBatch v2, hence producer ids and sequences
    max_version = 11

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        transactional_id = getattr(request, "transactional_id", None)
        results = {
            (topic.name, part.index): self._append(
                ctx,
                request.acks,
                topic.name,
                part,
                _verifier(ctx, transactional_id, topic.name, part.index),
            )
            for topic in request.topic_data
            for part in topic.partition_data
        }
        ctx.broker.appends.notify()
        if request.acks == 0:
            # Kafka answers nothing at acks=0; on an error it closes the connection instead.
            if any(r.error is not ErrorCode.none for r in results.values()):
                raise ConnectionAbortedError("acks=0 produce failed on at least one partition")
            return None
        return self._response(ctx, request, results)

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        results = {
            (topic.name, part.index): AppendResult(error=error)
            for topic in request.topic_data
            for part in topic.partition_data
        }
        return self._response(ctx, request, results)

    @staticmethod
    def _append(
        ctx: RequestContext,
        acks: int,
        topic: str,
        part: Any,
        verify: Callable[[BatchHeader], None] | None,
    ) -> AppendResult:
        broker = ctx.broker
        if acks not in VALID_ACKS:
            result = AppendResult(error=ErrorCode.invalid_required_acks)
        elif part.records is None:
            result = AppendResult(error=ErrorCode.invalid_record, error_message="null records")
        else:
            broker.maybe_auto_create(topic)
            try:
                partition_log = broker.storage.partition(topic, part.index)
            except UnknownTopicOrPartitionError:
                result = AppendResult(error=ErrorCode.unknown_topic_or_partition)
            else:
                result = (
                    AppendResult(error=ErrorCode.invalid_topic_exception)
                    if is_internal(topic)
                    else partition_log.append(bytes(part.records), now_ms(), verify)
                )
        broker.counters.count_append(
            result.error,
            result.duplicate,
            rules=result.judged_by,
            cache_differs=result.cache_differs,
        )
        return result

    @staticmethod
    def _response(
        ctx: RequestContext, request: Any, results: dict[tuple[str, int], AppendResult]
    ) -> object:
        response_type = ctx.response_type
        topic_type = nested(response_type, "TopicProduceResponse")
        partition_type = nested(response_type, "PartitionProduceResponse")
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            responses=tuple(
                build(
                    topic_type,
                    name=topic.name,
                    partition_responses=tuple(
                        build(
                            partition_type,
                            index=part.index,
                            error_code=results[topic.name, part.index].error,
                            base_offset=results[topic.name, part.index].base_offset,
                            log_append_time=None,
                            log_start_offset=results[topic.name, part.index].log_start_offset,
                            record_errors=(),
                            error_message=results[topic.name, part.index].error_message,
                        )
                        for part in topic.partition_data
                    ),
                )
                for topic in request.topic_data
            ),
        )


def _verifier(
    ctx: RequestContext, transactional_id: str | None, topic: str, partition: int
) -> Callable[[BatchHeader], None] | None:
    """ReplicaManager's verification for a transactional Produce, with its error mapping."""
    if transactional_id is None:
        return None

    def verify(header: BatchHeader) -> None:
        error = ctx.broker.transactions.handle_verify_partition(
            transactional_id,
            header.producer_id,
            header.producer_epoch,
            (topic, partition),
            abortable=ctx.api_version >= 11,
        )
        if error is ErrorCode.none:
            return
        if error is ErrorCode.invalid_txn_state:
            raise ProducerStateError(error, "Partition was not added to the transaction")
        if error in UNVERIFIED:
            raise ProducerStateError(
                ErrorCode.not_enough_replicas,
                "Unable to verify the partition has been added to the transaction. "
                f"Underlying error: {error.name.upper()}",
            )
        raise ProducerStateError(error, f"transaction verification: {error.name.upper()}")

    return verify
