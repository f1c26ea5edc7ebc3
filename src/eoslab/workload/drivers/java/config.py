"""librdkafka's properties as Kafka's Java client names them. A scenario's producer config and a
consumer workload's config are librdkafka's (the lab's first client); on the Java client each
property becomes the Java property of the same meaning, and a property the Java client has no
equivalent for is refused (:class:`DriverConfigError`, naming it) rather than dropped: a
scenario that relies on it would silently test something else.

Meanings that differ, and how they are carried over:

- librdkafka's ``socket.timeout.ms`` (its own wait for an answer) and ``request.timeout.ms`` (the
  broker's wait for acks, sent in the Produce request) are both Java's ``request.timeout.ms``
  (the client's wait, also sent as the Produce timeout): the smaller of the two given;
- ``message.timeout.ms`` is ``delivery.timeout.ms`` (Java refuses one below ``linger.ms`` +
  ``request.timeout.ms``: so does this translation, saying so);
- ``batch.num.messages: 1`` (one record per batch) is ``batch.size: 1`` (a batch too small for
  any record holds exactly one); other counts have no byte equivalent and are refused;
- ``statistics.interval.ms`` is how often the driver reports the producer id, epoch and counters;
- ``enable.partition.eof`` (the end-of-partition events) is the driver's, not a Java property.

Defaults are the Java client's own (what a Java application gets): e.g. ``linger.ms`` 0 before
4.0 (librdkafka: 5).
"""

from __future__ import annotations

from typing import Any

from eoslab.clients import ClientError

CALLBACKS = frozenset({"stats_cb", "error_cb", "on_delivery", "on_commit", "logger"})
COMMON: dict[str, str] = {
    "bootstrap.servers": "bootstrap.servers",
    "metadata.broker.list": "bootstrap.servers",
    "client.id": "client.id",
    "retry.backoff.ms": "retry.backoff.ms",
    "reconnect.backoff.ms": "reconnect.backoff.ms",
    "metadata.max.age.ms": "metadata.max.age.ms",
}
PRODUCER: dict[str, str] = {
    **COMMON,
    "enable.idempotence": "enable.idempotence",
    "acks": "acks",
    "request.required.acks": "acks",
    "max.in.flight.requests.per.connection": "max.in.flight.requests.per.connection",
    "max.in.flight": "max.in.flight.requests.per.connection",
    "retries": "retries",
    "message.send.max.retries": "retries",
    "linger.ms": "linger.ms",
    "queue.buffering.max.ms": "linger.ms",
    "message.timeout.ms": "delivery.timeout.ms",
    "delivery.timeout.ms": "delivery.timeout.ms",
    "transactional.id": "transactional.id",
    "transaction.timeout.ms": "transaction.timeout.ms",
    "compression.type": "compression.type",
    "compression.codec": "compression.type",
    "message.max.bytes": "max.request.size",
    "batch.size": "batch.size",
}
CONSUMER: dict[str, str] = {
    **COMMON,
    "group.id": "group.id",
    "group.instance.id": "group.instance.id",
    "group.protocol": "group.protocol",
    "enable.auto.commit": "enable.auto.commit",
    "auto.commit.interval.ms": "auto.commit.interval.ms",
    "auto.offset.reset": "auto.offset.reset",
    "session.timeout.ms": "session.timeout.ms",
    "heartbeat.interval.ms": "heartbeat.interval.ms",
    "max.poll.interval.ms": "max.poll.interval.ms",
    "isolation.level": "isolation.level",
    "partition.assignment.strategy": "partition.assignment.strategy",
}
ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}
OFFSET_RESETS = {
    "smallest": "earliest",
    "beginning": "earliest",
    "largest": "latest",
    "end": "latest",
}
TIMEOUTS = ("socket.timeout.ms", "request.timeout.ms")
DRIVER_OWN = frozenset({"statistics.interval.ms", "enable.partition.eof"})
DEFAULT_DELIVERY_TIMEOUT_MS = 120_000


class DriverConfigError(ClientError):
    """A librdkafka property the client has no equivalent for, or a combination it refuses."""


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _translated(config: dict[str, Any], names: dict[str, str]) -> dict[str, str]:
    native: dict[str, str] = {}
    for name, value in config.items():
        if name in CALLBACKS or name in DRIVER_OWN or name in TIMEOUTS:
            continue
        if name == "batch.num.messages" and names is PRODUCER:
            if int(value) != 1:
                raise DriverConfigError(
                    f"batch.num.messages: {value}: Kafka's Java client sizes batches in bytes "
                    "(batch.size); only 1 (one record per batch: batch.size 1) carries over"
                )
            native["batch.size"] = "1"
            continue
        if name not in names:
            raise DriverConfigError(
                f"{name}: librdkafka's property has no equivalent in Kafka's Java client"
            )
        native[names[name]] = _text(value)
    timeouts = [int(config[name]) for name in TIMEOUTS if name in config]
    if timeouts:
        native["request.timeout.ms"] = str(min(timeouts))
    return native


def producer(config: dict[str, Any]) -> tuple[dict[str, str], int]:
    """A producer's Java properties and the driver's statistics interval (ms; 0: none)."""
    native = _translated(config, PRODUCER)
    delivery = int(native.get("delivery.timeout.ms", DEFAULT_DELIVERY_TIMEOUT_MS))
    floor = int(native.get("linger.ms", 0)) + int(native.get("request.timeout.ms", 30_000))
    if delivery < floor:
        raise DriverConfigError(
            f"message.timeout.ms: {delivery} ms is below linger.ms + request.timeout.ms "
            f"({floor} ms), which Kafka's Java client refuses for delivery.timeout.ms"
        )
    return native, int(config.get("statistics.interval.ms", 0))


def consumer(config: dict[str, Any]) -> tuple[dict[str, str], int]:
    """A consumer's Java properties (the end-of-partition events are the driver's own)."""
    native = _translated(config, CONSUMER)
    if "partition.assignment.strategy" in native:
        names = native["partition.assignment.strategy"].split(",")
        unknown = [n for n in names if n.strip() not in ASSIGNORS]
        if unknown:
            raise DriverConfigError(f"partition.assignment.strategy: {unknown} unknown")
        native["partition.assignment.strategy"] = ",".join(ASSIGNORS[n.strip()] for n in names)
    if "auto.offset.reset" in native:
        native["auto.offset.reset"] = OFFSET_RESETS.get(
            native["auto.offset.reset"], native["auto.offset.reset"]
        )
    return native, 0
