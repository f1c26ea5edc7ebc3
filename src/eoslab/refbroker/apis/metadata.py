"""Metadata and DescribeCluster: one broker, leader of every partition, the advertised address.
Kafka's internal topics are flagged `is_internal` by name, as Kafka flags them (internal_topics.py)."""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from eoslab.refbroker.apis.base import NO_THROTTLE, ApiHandler, RequestContext
from eoslab.refbroker.internal_topics import is_internal
from eoslab.refbroker.partition_log import LEADER_EPOCH
from eoslab.refbroker.protocol import build, nested

NO_TOPIC_ID = uuid.UUID(int=0)
"""The id of a topic that is not known (or asked for by name only)."""
TOPIC_IDS_VERSION = 12
"""Metadata asks by topic id (and a name may be null) from v12 on; v10-11 have the fields."""


class MetadataHandler(ApiHandler):
    api_key = 3
    min_version = 0
    max_version = 12

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        broker = ctx.broker
        if ctx.api_version < TOPIC_IDS_VERSION and any(
            t.name is None or getattr(t, "topic_id", None) not in (None, NO_TOPIC_ID)
            for t in request.topics or ()
        ):  # KafkaApis: "Topic name can not be null" / "Topic IDs are not supported" before v12
            return self.reject(request, ctx, ErrorCode.invalid_request)
        if request.topics is None or (ctx.api_version == 0 and not request.topics):
            # null (v1+) or empty (v0) means every topic
            wanted: list[tuple[str | None, uuid.UUID | None]] = [
                (name, None) for name in sorted(broker.storage.topics())
            ]
        else:
            wanted = [(t.name, getattr(t, "topic_id", None)) for t in request.topics]
            if getattr(request, "allow_auto_topic_creation", True):
                for name, _ in wanted:
                    if name is not None:
                        broker.maybe_auto_create(name)
        partitions = broker.storage.topics()
        topic_type = nested(ctx.response_type, "MetadataResponseTopic")
        topics: list[object] = []
        for name, topic_id in wanted:
            if name is None:
                known_id = topic_id not in (None, NO_TOPIC_ID)
                error = ErrorCode.unknown_topic_id if known_id else ErrorCode.invalid_request
            else:
                error = (
                    ErrorCode.none if name in partitions else ErrorCode.unknown_topic_or_partition
                )
            count = partitions[name] if name is not None and error is ErrorCode.none else 0
            topics.append(
                build(
                    topic_type,
                    error_code=error,
                    name=name,
                    topic_id=broker.storage.topic_id(name)
                    if error is ErrorCode.none and name is not None
                    else topic_id or NO_TOPIC_ID,
                    is_internal=is_internal(name),
                    partitions=tuple(_partition(ctx, index) for index in range(count)),
                )
            )
        return self._response(ctx, tuple(topics))

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        """MetadataRequest.getErrorResponse: the error on every topic asked for, a null name as
        "" (the response before v12 cannot carry one), and at the top from v13."""
        topic_type = nested(ctx.response_type, "MetadataResponseTopic")
        topics: tuple[object, ...] = tuple(
            build(
                topic_type,
                error_code=error,
                name=t.name or "",
                topic_id=getattr(t, "topic_id", None) or NO_TOPIC_ID,
                is_internal=False,
                partitions=(),
            )
            for t in request.topics or ()
        )
        return self._response(ctx, topics, error)

    @staticmethod
    def _response(
        ctx: RequestContext, topics: tuple[object, ...], error: ErrorCode = ErrorCode.none
    ) -> object:
        config = ctx.broker.config
        broker_type = nested(ctx.response_type, "MetadataResponseBroker")
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            brokers=(
                build(
                    broker_type,
                    node_id=config.node_id,
                    host=config.advertised.host,
                    port=config.advertised.port,
                    rack=None,
                ),
            ),
            cluster_id=config.cluster_id,
            controller_id=config.node_id,
            topics=topics,
            error_code=error,
        )


def _partition(ctx: RequestContext, index: int) -> object:
    node = ctx.broker.config.node_id
    return build(
        nested(ctx.response_type, "MetadataResponsePartition"),
        error_code=ErrorCode.none,
        partition_index=index,
        leader_id=node,
        leader_epoch=LEADER_EPOCH,
        replica_nodes=(node,),
        isr_nodes=(node,),
        offline_replicas=(),
    )


class DescribeClusterHandler(ApiHandler):
    """Kafka 3.9's AdminClient.describeCluster() uses this API when the broker offers it."""

    api_key = 60
    min_version = 0
    max_version = 1

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        return self._response(ctx, ErrorCode.none)

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return self._response(ctx, error)

    @staticmethod
    def _response(ctx: RequestContext, error: ErrorCode) -> object:
        config = ctx.broker.config
        broker_type = nested(ctx.response_type, "DescribeClusterBroker")
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=error,
            error_message=None,
            cluster_id=config.cluster_id,
            controller_id=config.node_id,
            brokers=(
                build(
                    broker_type,
                    broker_id=config.node_id,
                    host=config.advertised.host,
                    port=config.advertised.port,
                    rack=None,
                ),
            )
            if error is ErrorCode.none
            else (),
        )
