"""From a librdkafka delivery report to a history outcome.

A record is ``fail`` only when it certainly was not written, whatever happened to its
earlier attempts: it never left the client, or the broker refused its content (a retry of
a batch that was written earlier carries the same content, so it would have been refused
too). Every other error may hide a write, so it is ``indeterminate``.

=================================================  ===============
error (librdkafka's name, ``KafkaError.name()``)   outcome
=================================================  ===============
none (a delivery report with an offset)            ack
_QUEUE_FULL, _MSG_SIZE_TOO_LARGE, _UNKNOWN_TOPIC,  fail (never left the client)
_UNKNOWN_PARTITION, _INVALID_ARG, _KEY_SERIALIZATION,
_VALUE_SERIALIZATION
MSG_SIZE_TOO_LARGE, INVALID_MSG, INVALID_RECORD,   fail (content refused by the broker)
CORRUPT_MESSAGE, RECORD_LIST_TOO_LARGE,
INVALID_MSG_SIZE, TOPIC_AUTHORIZATION_FAILED,
CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUIRED_ACKS
_PURGE_QUEUE (purged at session end, never sent)   unsent
PRODUCER_KILLED (the eoslab marker for a record    indeterminate
  sent by a producer killed before its report)
anything else (_MSG_TIMED_OUT, _PURGE_INFLIGHT,    indeterminate
  _FATAL, OUT_OF_ORDER_SEQUENCE_NUMBER,
  UNKNOWN_PRODUCER_ID, NOT_ENOUGH_REPLICAS, ...)
=================================================  ===============
"""

from __future__ import annotations

from eoslab.rundir import Outcome

PRODUCER_KILLED = "PRODUCER_KILLED"
"""The error of the history rows of a killed session's records in flight."""

NEVER_LEFT_THE_CLIENT = frozenset(
    {
        "_QUEUE_FULL",
        "_MSG_SIZE_TOO_LARGE",
        "_UNKNOWN_TOPIC",
        "_UNKNOWN_PARTITION",
        "_INVALID_ARG",
        "_KEY_SERIALIZATION",
        "_VALUE_SERIALIZATION",
    }
)
REFUSED_CONTENT = frozenset(
    {
        "MSG_SIZE_TOO_LARGE",
        "INVALID_MSG",
        "INVALID_RECORD",
        "CORRUPT_MESSAGE",
        "RECORD_LIST_TOO_LARGE",
        "INVALID_MSG_SIZE",
        "TOPIC_AUTHORIZATION_FAILED",
        "CLUSTER_AUTHORIZATION_FAILED",
        "INVALID_REQUIRED_ACKS",
    }
)
PURGED_UNSENT = "_PURGE_QUEUE"


def outcome_of(error: str | None) -> Outcome:
    """The history outcome of a delivery report with librdkafka error name ``error``."""
    if error is None:
        return Outcome.ACK
    if error in NEVER_LEFT_THE_CLIENT or error in REFUSED_CONTENT:
        return Outcome.FAIL
    if error == PURGED_UNSENT:
        return Outcome.UNSENT
    return Outcome.INDETERMINATE
