"""Response entities read differently from kio's where kio refuses what Kafka sends: the lab's
protocol-level clients (the probe's :class:`eoslab.probe.client.KafkaProtocolClient`) read a
response into :func:`response_type`'s entity.

No ``from __future__ import annotations`` here: kio reads an entity's fields from their real
types, not from strings.
"""

from dataclasses import dataclass, field
from typing import Any, ClassVar

from kio.index import load_response_from_request
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.describe_transactions.v0.response import TopicData
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.types import ProducerId, TransactionalId
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32Timedelta, i64


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedTransaction:
    """kio's ``describe_transactions.v0.response.TransactionState`` with its start time as the
    milliseconds Kafka sends: kio 0.6.5 reads them as a datetime and refuses Kafka's -1 (no
    transaction begun, as in state Empty: "Cannot parse negative timestamp", met by the probe's
    txn-late-write flow on Kafka 3.9 on 2026-12-06)."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(65)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    transactional_id: TransactionalId = field(metadata={"kafka_type": "string"})
    transaction_state: str = field(metadata={"kafka_type": "string"})
    transaction_timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    transaction_start_time_ms: i64 = field(metadata={"kafka_type": "int64"})
    producer_id: ProducerId = field(metadata={"kafka_type": "int64"})
    producer_epoch: i16 = field(metadata={"kafka_type": "int16"})
    topics: tuple[TopicData, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTransactionsAnswer:
    """kio's ``DescribeTransactionsResponse`` v0 whose transactions are
    :class:`DescribedTransaction`: what :func:`response_type` gives DescribeTransactions v0."""

    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(65)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    transaction_states: tuple[DescribedTransaction, ...]


def response_type(request_type: type[Any]) -> type[Any]:
    """The entity a request's response is read into: kio's, but for DescribeTransactions v0
    (:class:`DescribeTransactionsAnswer`)."""
    if request_type is DescribeTransactionsRequest:
        return DescribeTransactionsAnswer
    return load_response_from_request(request_type)
