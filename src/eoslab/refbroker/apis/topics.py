"""CreateTopics and DeleteTopics on a single broker (replication factor 1 only); Kafka's
internal topics made as its coordinators make them (internal_topics.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from eoslab.refbroker.apis.base import NO_THROTTLE, ApiHandler, RequestContext
from eoslab.refbroker.apis.metadata import NO_TOPIC_ID
from eoslab.refbroker.config import AUTO_CREATE_PARTITIONS
from eoslab.refbroker.internal_topics import INTERNAL_TOPIC_PARTITIONS
from eoslab.refbroker.log_manager import (
    InvalidTopicError,
    LogManager,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from eoslab.refbroker.protocol import build, nested
from eoslab.refbroker.topic_configs import InvalidConfigError, checked_configs, null_valued
from eoslab.refbroker.topic_names import topic_name_error

BROKER_DEFAULT = -1
MAX_PARTITIONS = 10_000


async def _stepwise(ctx: RequestContext, storage: LogManager, steps: Iterator[int]) -> None:
    """Run a topic's creation or deletion on ``storage``, letting the loop serve others between
    partitions; a crash-restart meanwhile ends it (the crashed storage must not act any more)."""
    for _ in steps:
        await asyncio.sleep(0)
        if ctx.broker.storage is not storage:
            raise ConnectionAbortedError("the broker crash-restarted during a topic operation")


Outcome = tuple[ErrorCode, str | None]


def _exists(name: str) -> str:
    return f"Topic '{name}' already exists."


async def _create(
    ctx: RequestContext, name: str, partitions: int, configs: Mapping[str, str]
) -> Outcome:
    storage = ctx.broker.storage
    try:
        await _stepwise(ctx, storage, storage.create_topic_steps(name, partitions, configs))
    except TopicExistsError:
        return ErrorCode.topic_already_exists, _exists(name)
    except InvalidTopicError as invalid:
        return ErrorCode.invalid_topic_exception, str(invalid)
    except ConnectionAbortedError as crashed:
        return ErrorCode.unknown_server_error, str(crashed)
    return ErrorCode.none, None


async def make_internal_topic(ctx: RequestContext, name: str) -> None:
    """Make an internal topic that does not exist, with its partitions, as Kafka's
    FindCoordinator does before it names a coordinator."""
    if name not in ctx.broker.storage.topics():
        await _create(ctx, name, INTERNAL_TOPIC_PARTITIONS[name], {})


Validated = tuple[ErrorCode, str | None, int, dict[str, str]]
"""A requested topic's check: its error and message, partitions and configs."""
TIMED_OUT: Outcome = (ErrorCode.request_timed_out, "Timed out waiting for the topic's creation.")


class CreateTopicsHandler(ApiHandler):
    """Kafka 3.9's (ZooKeeper mode) timing: a creation still under way when the request's
    ``timeout`` ends is answered REQUEST_TIMED_OUT and goes on (the topic appears whole once
    done); a timeout of 0 or less answers at once, as soon as each creation has begun."""

    api_key = 19
    min_version = 2
    max_version = 7

    def __init__(self) -> None:
        self._creations: set[asyncio.Task[Outcome]] = set()
        """Creations the loop must keep (a task only weakly referenced may be collected)."""

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        validated = [(topic.name, *self._validate(ctx, topic)) for topic in request.topics]
        creations: dict[int, asyncio.Task[Outcome]] = {}
        for index, (name, error, _, partitions, configs) in enumerate(validated):
            if error is ErrorCode.none and not request.validate_only:
                created = asyncio.create_task(_create(ctx, name, partitions, configs))
                self._creations.add(created)
                created.add_done_callback(self._creations.discard)
                creations[index] = created
        timeout_s = request.timeout.total_seconds()
        if creations:
            await asyncio.sleep(0)  # every creation begins (its name reserved, its checks made)
            if timeout_s > 0:
                await asyncio.wait(creations.values(), timeout=timeout_s)
        outcomes = []
        for index, (name, error, message, partitions, _) in enumerate(validated):
            outcome: Outcome = (error, message)
            if (creation := creations.get(index)) is not None and creation.done():
                outcome = creation.result()
            elif creation is not None and timeout_s > 0:
                outcome = TIMED_OUT
            outcomes.append((name, *outcome, partitions))
        return self._response(ctx, outcomes)

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return self._response(ctx, [(t.name, error, None, -1) for t in request.topics])

    @classmethod
    def _validate(cls, ctx: RequestContext, topic: Any) -> Validated:
        """Kafka 3.9's checks (ZkAdminManager.createTopics), in its order: the name, an
        existing topic, null config values, the partitions and replicas, the configs."""
        if (message := topic_name_error(topic.name)) is not None:
            return ErrorCode.invalid_topic_exception, message, -1, {}
        if topic.name in ctx.broker.storage.topics():
            return ErrorCode.topic_already_exists, _exists(topic.name), -1, {}
        configs = [(config.name, config.value) for config in topic.configs]
        if (message := null_valued(configs)) is not None:
            return ErrorCode.invalid_config, message, -1, {}
        error, message, partitions = cls._partitions(ctx, topic)
        if error is not ErrorCode.none:
            return error, message, -1, {}
        try:
            return ErrorCode.none, None, partitions, checked_configs(configs)
        except InvalidConfigError as invalid:
            return ErrorCode.invalid_config, str(invalid), -1, {}

    @staticmethod
    def _partitions(ctx: RequestContext, topic: Any) -> tuple[ErrorCode, str | None, int]:
        node = ctx.broker.config.node_id
        if topic.assignments:
            if topic.num_partitions != BROKER_DEFAULT or topic.replication_factor != BROKER_DEFAULT:
                message = (
                    "Both numPartitions or replicationFactor and replicasAssignments were set."
                )
                return ErrorCode.invalid_request, message, -1
            if any(tuple(a.broker_ids) != (node,) for a in topic.assignments):
                return ErrorCode.invalid_replica_assignment, f"Only broker {node} exists.", -1
            return ErrorCode.none, None, len(topic.assignments)
        if topic.replication_factor not in (BROKER_DEFAULT, 1):
            message = (
                f"Replication factor: {topic.replication_factor} larger than available brokers: 1."
            )
            return ErrorCode.invalid_replication_factor, message, -1
        partitions = (
            AUTO_CREATE_PARTITIONS
            if topic.num_partitions == BROKER_DEFAULT
            else topic.num_partitions
        )
        if not 0 < partitions <= MAX_PARTITIONS:
            return (
                ErrorCode.invalid_partitions,
                f"Number of partitions must be in 1..{MAX_PARTITIONS}.",
                -1,
            )
        return ErrorCode.none, None, partitions

    @staticmethod
    def _response(
        ctx: RequestContext, outcomes: list[tuple[str, ErrorCode, str | None, int]]
    ) -> object:
        result_type = nested(ctx.response_type, "CreatableTopicResult")
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            topics=tuple(
                build(
                    result_type,
                    name=name,
                    topic_id=_created_id(ctx, name) if error is ErrorCode.none else NO_TOPIC_ID,
                    error_code=error,
                    error_message=message,
                    num_partitions=partitions if error is ErrorCode.none else -1,
                    replication_factor=1 if error is ErrorCode.none else -1,
                    configs=(),
                )
                for name, error, message, partitions in outcomes
            ),
        )


class DeleteTopicsHandler(ApiHandler):
    api_key = 20
    min_version = 1
    max_version = 6

    async def handle(self, request: Any, ctx: RequestContext) -> object | None:
        names = _requested_names(request)
        outcomes: list[tuple[str | None, uuid.UUID, ErrorCode]] = []
        for name, topic_id in names:
            if name is None:
                outcomes.append((name, topic_id, ErrorCode.unknown_topic_id))
                continue
            if topic_name_error(name) is not None:  # such a topic cannot exist
                outcomes.append((name, topic_id, ErrorCode.unknown_topic_or_partition))
                continue
            try:
                storage = ctx.broker.storage
                await _stepwise(ctx, storage, storage.delete_topic_steps(name))
            except UnknownTopicOrPartitionError:
                outcomes.append((name, topic_id, ErrorCode.unknown_topic_or_partition))
            else:
                outcomes.append((name, topic_id, ErrorCode.none))
        return self._response(ctx, outcomes)

    def reject(self, request: Any, ctx: RequestContext, error: ErrorCode) -> object:
        return self._response(ctx, [(n, i, error) for n, i in _requested_names(request)])

    @staticmethod
    def _response(
        ctx: RequestContext, outcomes: list[tuple[str | None, uuid.UUID, ErrorCode]]
    ) -> object:
        result_type = nested(ctx.response_type, "DeletableTopicResult")
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            responses=tuple(
                build(
                    result_type, name=name, topic_id=topic_id, error_code=error, error_message=None
                )
                for name, topic_id, error in outcomes
            ),
        )


def _created_id(ctx: RequestContext, name: str) -> uuid.UUID:
    """The new topic's id; none for a validate-only request, which creates nothing."""
    try:
        return ctx.broker.storage.topic_id(name)
    except UnknownTopicOrPartitionError:
        return NO_TOPIC_ID


def _requested_names(request: Any) -> list[tuple[str | None, uuid.UUID]]:
    """v6 lists topics as (name, id) states; earlier versions as plain names."""
    if hasattr(request, "topic_names"):
        return [(name, NO_TOPIC_ID) for name in request.topic_names]
    return [(t.name, t.topic_id) for t in request.topics]
