"""Metadata and DescribeCluster: one broker, leader of every partition, the advertised address."""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from eoslab.refbroker.apis.base import NO_THROTTLE, ApiHandler, RequestContext
from eoslab.refbroker.partition_log import LEADER_EPOCH
from eoslab.refbroker.protocol import build, nested

NO_TOPIC_ID = uuid.UUID(int=0)
"""The id of a topic that is not known (or asked for by name only)."""


class MetadataHandler(ApiHandler):
    api_key = 3
    min_version = 0
    max_version = 12

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        broker = ctx.broker
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
                    is_internal=False,
                    partitions=tuple(_partition(ctx, index) for index in range(count)),
                )
            )
        return self._response(ctx, tuple(topics))

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        topic_type = nested(ctx.response_type, "MetadataResponseTopic")
        names = [t.name for t in request.topics or ()]
        topics: tuple[object, ...] = tuple(
            build(topic_type, error_code=error, name=n, topic_id=NO_TOPIC_ID, partitions=())
            for n in names
        )
        return self._response(ctx, topics)

    @staticmethod
    def _response(ctx: RequestContext, topics: tuple[object, ...]) -> object:
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
