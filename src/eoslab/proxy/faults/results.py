"""Where a Kafka response carries its error codes, API by API, and the three things the proxy
does with them: answer a request with an error response of its own (the `error` fault's
reject), rewrite the error codes of a broker's response (its rewrite), and read them (the
answer to a `late` copy).

kio decodes and encodes every message; this module only knows each API's *results*: the
entries of its response that answer the request entry by entry (a Produce response's
partitions answer the request's partitions, a FindCoordinator v4 response's coordinators the
request's keys). An API with per-partition results is *partitioned* (its results can be
selected by partition). An error response is built the way Kafka's own ``getErrorResponse``
builds one: the request's entries mirrored, every error code set, every other field Kafka's
"none" (-1 for ids, offsets and epochs, empty, null).
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.serial._implicit_defaults import get_implicit_default
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional
from kio.serial.errors import SerialError

from eoslab.kafka_api import SIZE_PREFIX, api_name, error_name, parse_api_key
from eoslab.proxy.framing import read_request_header

ERROR_CODE = "error_code"
"""kio's kafka_type of error-code fields (``error_code``, ``partition_error_code``)."""
IDENTITIES = (
    "name",
    "topic",
    "topic_id",
    "group_id",
    "key",
    "transactional_id",
    "member_id",
    "index",
    "partition_index",
    "partition",
)
"""Fields that name a result, in the order a result's label is made of them."""


@dataclass(frozen=True, slots=True)
class Level:
    """One level of an API's results: the request's array and the response's array answering
    it entry by entry (the topics, then each topic's partitions)."""

    request: str
    response: str
    keys: tuple[tuple[str, str], ...] = ()
    """(request field, response field): what names an entry, copied into its answer (pairs
    the version does not have on both sides are skipped)."""
    value: str | None = None
    """The response field a plain request value goes to (a partition index in a list of them,
    a group id, a coordinator key)."""


@dataclass(frozen=True, slots=True)
class Results:
    levels: tuple[Level, ...] = ()
    partition: str | None = None
    """The field of the deepest level's entries holding a partition index: the API has
    per-partition results."""


PRODUCE = 0
TOPIC_KEYS = (("name", "name"), ("topic", "topic"), ("topic_id", "topic_id"))
GROUP_KEYS = (("group_id", "group_id"),)
TOPICS = Level("topics", "topics", TOPIC_KEYS)
PARTITIONS = Level("partitions", "partitions", (("partition_index", "partition_index"),))
PARTITION_INDEXES = Level("partition_indexes", "partitions", value="partition_index")
TOPIC_PARTITIONS = Results((TOPICS, PARTITIONS), "partition_index")
TOP_LEVEL = Results()

RESULTS: dict[int, tuple[Results, ...]] = {
    # Produce
    0: (
        Results(
            (
                Level("topic_data", "responses", TOPIC_KEYS),
                Level("partition_data", "partition_responses", (("index", "index"),)),
            ),
            "index",
        ),
    ),
    # Fetch
    1: (
        Results(
            (
                Level("topics", "responses", TOPIC_KEYS),
                Level("partitions", "partitions", (("partition", "partition_index"),)),
            ),
            "partition_index",
        ),
    ),
    2: (TOPIC_PARTITIONS,),  # ListOffsets
    3: (Results((TOPICS,)),),  # Metadata
    8: (TOPIC_PARTITIONS,),  # OffsetCommit
    # OffsetFetch: batched by group from v8
    9: (
        Results(
            (Level("groups", "groups", GROUP_KEYS), TOPICS, PARTITION_INDEXES), "partition_index"
        ),
        Results((TOPICS, PARTITION_INDEXES), "partition_index"),
    ),
    # FindCoordinator: batched by key from v4
    10: (Results((Level("coordinator_keys", "coordinators", value="key"),)), TOP_LEVEL),
    11: (TOP_LEVEL,),  # JoinGroup
    12: (TOP_LEVEL,),  # Heartbeat
    # LeaveGroup: batched by member from v3
    13: (
        Results(
            (
                Level(
                    "members",
                    "members",
                    (("member_id", "member_id"), ("group_instance_id", "group_instance_id")),
                ),
            )
        ),
        TOP_LEVEL,
    ),
    14: (TOP_LEVEL,),  # SyncGroup
    15: (Results((Level("groups", "groups", value="group_id"),)),),  # DescribeGroups
    16: (TOP_LEVEL,),  # ListGroups
    18: (TOP_LEVEL,),  # ApiVersions
    19: (Results((TOPICS,)),),  # CreateTopics
    # DeleteTopics: by name or topic id from v6
    20: (
        Results((Level("topics", "responses", TOPIC_KEYS),)),
        Results((Level("topic_names", "responses", value="name"),)),
    ),
    21: (TOPIC_PARTITIONS,),  # DeleteRecords
    22: (TOP_LEVEL,),  # InitProducerId
    # OffsetForLeaderEpoch
    23: (
        Results(
            (TOPICS, Level("partitions", "partitions", (("partition", "partition"),))), "partition"
        ),
    ),
    # AddPartitionsToTxn: v4+ (brokers') batched by transaction
    24: (
        Results(
            (
                Level("v3_and_below_topics", "results_by_topic_v3_and_below", TOPIC_KEYS),
                Level("partitions", "results_by_partition", value="partition_index"),
            ),
            "partition_index",
        ),
        Results(
            (
                Level(
                    "transactions",
                    "results_by_transaction",
                    (("transactional_id", "transactional_id"),),
                ),
                Level("topics", "topic_results", TOPIC_KEYS),
                Level("partitions", "results_by_partition", value="partition_index"),
            ),
            "partition_index",
        ),
    ),
    25: (TOP_LEVEL,),  # AddOffsetsToTxn
    26: (TOP_LEVEL,),  # EndTxn
    28: (TOPIC_PARTITIONS,),  # TxnOffsetCommit
    42: (Results((Level("groups_names", "results", value="group_id"),)),),  # DeleteGroups
    47: (TOPIC_PARTITIONS,),  # OffsetDelete
    60: (TOP_LEVEL,),  # DescribeCluster
    61: (Results((TOPICS, PARTITION_INDEXES), "partition_index"),),  # DescribeProducers
    # DescribeTransactions
    65: (Results((Level("transactional_ids", "transaction_states", value="transactional_id"),)),),
    66: (TOP_LEVEL,),  # ListTransactions
    68: (TOP_LEVEL,),  # ConsumerGroupHeartbeat
    69: (Results((Level("group_ids", "groups", value="group_id"),)),),  # ConsumerGroupDescribe
}
"""Per API key, its results: alternatives in order, the first whose fields a version has."""


class UnencodableError(ValueError):
    """A message of an API or version the proxy cannot decode or encode, or one kio cannot
    parse."""


def encodable_apis() -> tuple[int, ...]:
    return tuple(sorted(RESULTS))


def require_encodable(api: str) -> str:
    """``api`` (a validated API name, or "*") if the proxy can encode its messages; else a
    ValueError naming those it can."""
    if api == "*":
        raise ValueError("name one API")
    if parse_api_key(api) not in RESULTS:
        known = ", ".join(api_name(key) for key in encodable_apis())
        raise ValueError(f"the proxy cannot encode {api} messages (it can: {known})")
    return api


def partitioned(api_key: int) -> bool:
    return any(results.partition is not None for results in RESULTS.get(api_key, ()))


@dataclass(frozen=True, slots=True)
class Schema:
    """One API version as the proxy handles it: kio's request and response classes and the
    results that fit them."""

    api_key: int
    version: int
    request: Any
    response: Any
    results: Results


@cache
def schema(api_key: int, version: int) -> Schema | None:
    """The API version's schema, None when kio has no classes for it or no results fit."""
    try:
        request = load_request_schema(api_key, version)
        response = load_response_schema(api_key, version)
    except KioIndexError:
        return None
    for results in RESULTS.get(api_key, ()):
        if _fits(results.levels, request, response):
            return Schema(api_key, version, request, response, results)
    return None


def encodable_versions(api_key: int) -> tuple[int, ...]:
    """Every version of ``api_key`` the proxy can answer and rewrite."""
    versions = schema_name_map.get(api_key_map.get(api_key, ""), {})
    return tuple(v for v in sorted(versions) if schema(api_key, v) is not None)


def _fits(levels: tuple[Level, ...], request: Any, response: Any) -> bool:
    if not levels:
        return True
    level = levels[0]
    request_field = field_of(request, level.request)
    response_field = field_of(response, level.response)
    if request_field is None or response_field is None:
        return False
    answer = classify_field(response_field)
    if not isinstance(answer, EntityTupleField):
        return False
    if level.value is not None:
        return field_of(answer.type_, level.value) is not None and len(levels) == 1
    entry = classify_field(request_field)
    if not isinstance(entry, EntityTupleField):
        return False
    return _fits(levels[1:], entry.type_, answer.type_)


@dataclass(frozen=True, slots=True)
class Result:
    """One result an action touched: its label ("topic:1", a group id, "" for the whole
    response) and the error it carried before (a rewrite), None where there was none."""

    label: str
    before: str | None = None


@dataclass(frozen=True, slots=True)
class Encoded:
    """A message the proxy made: its frame (size prefix included) and the results in it that
    carry the injected error."""

    frame: bytes
    results: tuple[Result, ...]


# ---------------------------------------------------------------------------- framing
def decode_request(frame: bytes | memoryview) -> tuple[Schema, Any, Any]:
    """(schema, header, body) of a request frame (size prefix included)."""
    prefix = read_request_header(frame)
    found = _schema_or_raise(prefix.api_key, prefix.api_version)
    return (found, *_decode(frame, found.request))


def decode_response(frame: bytes | memoryview, found: Schema) -> tuple[Any, Any]:
    """(header, body) of a response frame (size prefix included) of ``found``'s version."""
    return _decode(frame, found.response)


def _decode(frame: bytes | memoryview, entity_type: Any) -> tuple[Any, Any]:
    try:
        header, size = entity_reader(entity_type.__header_schema__)(frame, SIZE_PREFIX.size)
        body, _ = entity_reader(entity_type)(frame, SIZE_PREFIX.size + size)
    except (SerialError, ValueError) as error:
        raise UnencodableError(
            f"{entity_type.__name__} v{entity_type.__version__}: {error}"
        ) from None
    return header, body


def frame_of(header: Any, body: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(header))(buffer, header)
    entity_writer(type(body))(buffer, body)
    return SIZE_PREFIX.pack(buffer.tell()) + buffer.getvalue()


def _schema_or_raise(api_key: int, version: int) -> Schema:
    found = schema(api_key, version)
    if found is None:
        raise UnencodableError(f"{api_name(api_key)} v{version}")
    return found


# ---------------------------------------------------------------------------- the three uses
def error_response(
    request_frame: bytes | memoryview, error: ErrorCode, partition: int | None = None
) -> Encoded | None:
    """The response Kafka would give the request had it failed with ``error``: every result
    carries it. None when that answer has no place for it (a Metadata request for every
    topic, a request without ``partition``) or the request expects no answer (acks=0)."""
    found, header, request = decode_request(request_frame)
    if found.api_key == PRODUCE and request.acks == 0:
        return None
    body = _answer(request, found.response, found.results.levels, error)
    results = list(_results(body, found.results))
    if not results or (
        partition is not None
        and all(_partition(entry, found.results) != partition for _, entry in results)
    ):
        return None
    response_header = found.response.__header_schema__(correlation_id=header.correlation_id)
    return Encoded(frame_of(response_header, body), tuple(Result(label) for label, _ in results))


def rewritten_response(
    response_frame: bytes | memoryview,
    api_key: int,
    version: int,
    error: ErrorCode,
    partition: int | None = None,
) -> Encoded | None:
    """The broker's response with ``error`` in its results: a partitioned API's partitions
    (only ``partition``, when given), every error code of any other API's response. None when
    no result is there to carry it."""
    found = _schema_or_raise(api_key, version)
    header, body = decode_response(response_frame, found)
    if found.results.partition is None:
        touched = [
            Result(label, error_name(_error_of(entry)))
            for label, entry in _results(body, found.results)
        ]
        body = _with_errors(body, error, deep=True)
    else:
        rewrite = _PartitionRewrite(found.results, error, partition)
        body = rewrite.apply(body, found.results.levels)
        touched = rewrite.touched
    if not touched:
        return None
    return Encoded(frame_of(header, body), tuple(touched))


def answer_errors(response_frame: bytes | memoryview, api_key: int, version: int) -> dict[str, str]:
    """The error each result of a response carries: label -> error name."""
    found = _schema_or_raise(api_key, version)
    _header, body = decode_response(response_frame, found)
    return {label: error_name(_error_of(entry)) for label, entry in _results(body, found.results)}


# ---------------------------------------------------------------------------- results
def _results(body: Any, results: Results) -> Iterator[tuple[str, Any]]:
    """(label, entity) of every result: the deepest entries of a partitioned API; the
    response itself (if it has an error code) and the entries of every level of the others."""
    if results.partition is None and _error_fields(body):
        yield "", body
    yield from _entries(body, results.levels, "", every_level=results.partition is None)


def _entries(
    entity: Any, levels: tuple[Level, ...], prefix: str, *, every_level: bool
) -> Iterator[tuple[str, Any]]:
    if not levels:
        return
    for entry in getattr(entity, levels[0].response) or ():
        label = _join(prefix, _label(entry))
        if every_level or len(levels) == 1:
            yield label, entry
        yield from _entries(entry, levels[1:], label, every_level=every_level)


@dataclass(slots=True)
class _PartitionRewrite:
    """Sets the error codes of a partitioned response's selected partitions, noting each."""

    results: Results
    error: ErrorCode
    partition: int | None
    touched: list[Result] = dataclasses.field(default_factory=list)

    def apply(self, entity: Any, levels: tuple[Level, ...], prefix: str = "") -> Any:
        level = levels[0]
        entries = getattr(entity, level.response)
        if entries is None:
            return entity
        changed = [self._entry(entry, levels, _join(prefix, _label(entry))) for entry in entries]
        return dataclasses.replace(entity, **{level.response: tuple(changed)})

    def _entry(self, entry: Any, levels: tuple[Level, ...], label: str) -> Any:
        if len(levels) > 1:
            return self.apply(entry, levels[1:], label)
        if self.partition is not None and _partition(entry, self.results) != self.partition:
            return entry
        self.touched.append(Result(label, error_name(_error_of(entry))))
        return _with_errors(entry, self.error, deep=False)


def _partition(entry: Any, results: Results) -> int | None:
    return None if results.partition is None else getattr(entry, results.partition, None)


def _label(entry: Any) -> str:
    for name in IDENTITIES:
        value = getattr(entry, name, None)
        if value is not None and value != "":
            return str(value)
    return ""


def _join(prefix: str, label: str) -> str:
    return f"{prefix}:{label}" if prefix else label


# ---------------------------------------------------------------------------- building
def _answer(request: Any, response_type: Any, levels: tuple[Level, ...], error: ErrorCode) -> Any:
    """A response of ``response_type`` answering ``request`` with ``error`` everywhere."""
    values = blank_values(response_type, error)
    if levels:
        level = levels[0]
        entry_type = classify_field(_required_field(response_type, level.response)).type_
        values[level.response] = tuple(
            _entry(item, entry_type, levels, error)
            for item in getattr(request, level.request) or ()
        )
    return response_type(**values)


def _entry(item: Any, entry_type: Any, levels: tuple[Level, ...], error: ErrorCode) -> Any:
    """The answer to one request entry: named as it is, its own entries answered in turn."""
    level = levels[0]
    if level.value is not None:
        return entry_type(**{**blank_values(entry_type, error), level.value: item})
    names = {
        answer: getattr(item, asked)
        for asked, answer in level.keys
        if field_of(type(item), asked) is not None and field_of(entry_type, answer) is not None
    }
    return dataclasses.replace(_answer(item, entry_type, levels[1:], error), **names)


def blank_values(entity_type: Any, error: ErrorCode) -> dict[str, Any]:
    """Every field of ``entity_type`` without a default at Kafka's "none", every error code
    at ``error``."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(entity_type):
        if field.metadata.get("kafka_type") == ERROR_CODE:
            values[field.name] = error
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            values[field.name] = _blank(field, error)
    return values


def _blank(field: dataclasses.Field[Any], error: ErrorCode) -> Any:
    if is_optional(field):
        return None
    kind = classify_field(field)
    if kind.is_array:
        return ()
    value_type: Any = kind.type_
    if isinstance(kind, EntityField):
        return value_type(**blank_values(value_type, error))
    kafka_type = field.metadata.get("kafka_type", "")
    if kafka_type.startswith("int"):
        return value_type(-1)
    if kafka_type == "bool":
        return False
    return get_implicit_default(value_type)


# ---------------------------------------------------------------------------- error fields
def _error_fields(entity: Any) -> tuple[str, ...]:
    """The error-code fields of an entity (or entity class)."""
    entity_type: type = entity if isinstance(entity, type) else type(entity)
    return _error_fields_of(entity_type)


@cache
def _error_fields_of(entity_type: type) -> tuple[str, ...]:
    fields: Any = dataclasses.fields(entity_type)  # a kio entity: a dataclass
    return tuple(f.name for f in fields if f.metadata.get("kafka_type") == ERROR_CODE)


def _error_of(entity: Any) -> ErrorCode:
    names = _error_fields(entity)
    return getattr(entity, names[0]) if names else ErrorCode.none


def _with_errors(entity: Any, error: ErrorCode, *, deep: bool) -> Any:
    """``entity`` with its error codes at ``error`` (``deep``: its nested entities' too)."""
    changes: dict[str, Any] = dict.fromkeys(_error_fields(entity), error)
    if deep:
        for field in dataclasses.fields(entity):
            value = getattr(entity, field.name)
            kind = classify_field(field)
            if isinstance(kind, EntityTupleField) and value:
                changes[field.name] = tuple(_with_errors(item, error, deep=True) for item in value)
            elif isinstance(kind, EntityField) and value is not None:
                changes[field.name] = _with_errors(value, error, deep=True)
    return dataclasses.replace(entity, **changes) if changes else entity


def field_of(entity_type: Any, name: str) -> dataclasses.Field[Any] | None:
    return next((f for f in dataclasses.fields(entity_type) if f.name == name), None)


def _required_field(entity_type: Any, name: str) -> dataclasses.Field[Any]:
    found = field_of(entity_type, name)
    assert found is not None  # the results fit the schema (_fits)
    return found
