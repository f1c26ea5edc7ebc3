"""Fetch v4+: raw batches from PartitionLog.read, with Kafka's byte limits and long poll.

Every answer carries the partition's last stable offset; a read_committed fetch
(isolation_level 1) reads below it only and gets the aborted transactions of what it read
(an empty list when it read nothing), a read_uncommitted one gets null there, as from Kafka."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from eoslab.refbroker.apis.base import NO_THROTTLE, READ_COMMITTED, ApiHandler, RequestContext
from eoslab.refbroker.log_manager import UnknownTopicOrPartitionError
from eoslab.refbroker.partition_log import OffsetOutOfRangeError
from eoslab.refbroker.protocol import build, has_field, nested
from eoslab.refbroker.txn_index import AbortedTxn

SESSIONLESS = 0
"""We never create fetch sessions (KIP-227); session id 0 tells clients to send full fetches."""
FINAL_EPOCH = -1
INITIAL_EPOCH = 0


@dataclass(frozen=True)
class PartitionFetch:
    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    last_stable_offset: int = -1
    aborted: tuple[AbortedTxn, ...] | None = None


class FetchHandler(ApiHandler):
    api_key = 1
    min_version = 4
    max_version = 12  # v13+ address topics by id only; we stay with names

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        if getattr(request, "session_id", SESSIONLESS) != SESSIONLESS:
            return self.reject(request, ctx, ErrorCode.fetch_session_id_not_found)
        if getattr(request, "session_epoch", FINAL_EPOCH) not in (FINAL_EPOCH, INITIAL_EPOCH):
            return self.reject(request, ctx, ErrorCode.invalid_fetch_session_epoch)
        deadline = time.monotonic() + request.max_wait.total_seconds()
        while True:
            results = self._read_all(ctx, request)
            size = sum(len(r.records) for r in results.values())
            errors = any(r.error is not ErrorCode.none for r in results.values())
            remaining = deadline - time.monotonic()
            if size >= request.min_bytes or errors or remaining <= 0:
                return self._response(ctx, request, results, ErrorCode.none)
            await ctx.broker.appends.wait(remaining)

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        if has_field(ctx.response_type, "error_code"):  # v7+: one top-level error, no topics
            return self._response(ctx, request, {}, error)
        results = {
            (topic.topic, part.partition): PartitionFetch(error)
            for topic in request.topics
            for part in topic.partitions
        }
        return self._response(ctx, request, results, error)

    @staticmethod
    def _read_all(ctx: RequestContext, request: Any) -> dict[tuple[str, int], PartitionFetch]:
        """Kafka's limits: the first non-empty partition may exceed max_bytes by one batch
        (KIP-74); after it, only whole batches within what is left of max_bytes."""
        storage = ctx.broker.storage
        read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
        results: dict[tuple[str, int], PartitionFetch] = {}
        budget = request.max_bytes
        for topic in request.topics:
            for part in topic.partitions:
                try:
                    plog = storage.partition(topic.topic, part.partition)
                except UnknownTopicOrPartitionError:
                    results[topic.topic, part.partition] = PartitionFetch(
                        ErrorCode.unknown_topic_or_partition
                    )
                    continue
                high_watermark, log_start = plog.log_end_offset, plog.log_start_offset
                stable = plog.last_stable_offset
                limit = min(part.partition_max_bytes, budget)
                first_data = budget == request.max_bytes
                aborted: tuple[AbortedTxn, ...] | None = None
                try:
                    # read even when the budget is spent: the offset must still be validated
                    if read_committed:
                        records, found = plog.read_committed(part.fetch_offset, max(limit, 1))
                        aborted = tuple(found)
                    else:
                        records = plog.read(part.fetch_offset, max(limit, 1))
                except OffsetOutOfRangeError:
                    results[topic.topic, part.partition] = PartitionFetch(
                        ErrorCode.offset_out_of_range, high_watermark, log_start
                    )
                    continue
                if len(records) > limit and not first_data:
                    records, aborted = b"", None if aborted is None else ()
                budget -= len(records)
                results[topic.topic, part.partition] = PartitionFetch(
                    ErrorCode.none, high_watermark, log_start, records, stable, aborted
                )
        return results

    @staticmethod
    def _response(
        ctx: RequestContext,
        request: Any,
        results: dict[tuple[str, int], PartitionFetch],
        top_level_error: ErrorCode,
    ) -> object:
        response_type = ctx.response_type
        topic_type = nested(response_type, "FetchableTopicResponse")
        partition_type = nested(response_type, "PartitionData")
        topics: tuple[object, ...] = tuple(
            build(
                topic_type,
                topic=topic.topic,
                partitions=tuple(
                    _partition_data(partition_type, part.partition, results[key])
                    for part in topic.partitions
                    if (key := (topic.topic, part.partition)) in results
                ),
            )
            for topic in request.topics
            if results
        )
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            error_code=top_level_error,
            session_id=SESSIONLESS,
            responses=topics,
        )


def _partition_data(partition_type: type, index: int, result: PartitionFetch) -> object:
    aborted_type = nested(partition_type, "AbortedTransaction")
    return build(
        partition_type,
        partition_index=index,
        error_code=result.error,
        high_watermark=result.high_watermark,
        last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset,
        aborted_transactions=None
        if result.aborted is None
        else tuple(
            build(aborted_type, producer_id=a.producer_id, first_offset=a.first_offset)
            for a in result.aborted
        ),
        preferred_read_replica=-1,
        records=result.records,
    )
