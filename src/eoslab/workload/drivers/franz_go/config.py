"""librdkafka's properties as the franz-go driver's options. A scenario's producer config and a
consumer workload's config are librdkafka's (the lab's first client); on franz-go each property
becomes the kgo option of the same meaning — the driver's configuration names kgo's option
functions (``ProducerLinger``, ``FetchIsolationLevel``...), durations written as Go durations
(``"5ms"``) — and a property franz-go has no equivalent for is refused
(:class:`DriverConfigError`, naming it) rather than dropped: a scenario that relies on it would
silently test something else.

Meanings that differ, and how they are carried over:

- librdkafka's ``request.timeout.ms`` (the broker's wait for acks, sent in the Produce request)
  is ``ProduceRequestTimeout`` (the same field); ``socket.timeout.ms`` (librdkafka's own wait
  for an answer) is ``RequestTimeoutOverhead``: franz-go's own wait, on top of a request's
  timeout field when it has one;
- ``message.timeout.ms`` is ``RecordDeliveryTimeout``;
- ``max.poll.interval.ms`` is ``RebalanceTimeout`` (both are the JoinGroup's rebalance timeout;
  franz-go has no local deadline between polls besides it);
- ``enable.idempotence: false`` is ``DisableIdempotentWrite`` (franz-go is idempotent unless told
  otherwise; it ignores ``max.in.flight`` while idempotent: at most 5 in flight);
- ``group.protocol: consumer`` (KIP-848) is ``ServerSideBalancer`` (franz-go v1.22.0 and later),
  ``group.remote.assignor`` its balancer (range, or uniform: franz-go's sticky balancer);
- ``batch.num.messages`` is refused: franz-go sizes batches in bytes only, and refuses a record
  larger than its batch limit rather than sending it alone;
- ``debug`` (librdkafka's debug contexts, e.g. ``eos,protocol``) is kgo's log at debug level,
  whatever the contexts, on the driver's stderr: the session's log;
- ``statistics.interval.ms`` is how often the driver reports the producer id, epoch and counters;
  ``enable.partition.eof`` (the end-of-partition events) is the driver's, not a kgo option.

Defaults are franz-go's own (what a franz-go application gets): e.g. the cooperative-sticky
balancer (librdkafka: range,roundrobin) and no record timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eoslab.clients import ClientError

Convert = Callable[[str, Any], str | None]
"""(librdkafka property, its value) -> the option's value (None: the option is not set)."""


class DriverConfigError(ClientError):
    """A librdkafka property franz-go has no equivalent for, or a value it cannot take."""


def _text(_: str, value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value).strip()


def _ms(name: str, value: Any) -> str:
    try:
        return f"{int(value)}ms"
    except (TypeError, ValueError):
        raise DriverConfigError(f"{name}: {value!r} is not a number of milliseconds") from None


def _integer(name: str, value: Any) -> str:
    try:
        return str(int(value))
    except (TypeError, ValueError):
        raise DriverConfigError(f"{name}: {value!r} is not an integer") from None


def _choice(choices: dict[str, str | None]) -> Convert:
    def convert(name: str, value: Any) -> str | None:
        key = _text(name, value).lower()
        if key not in choices:
            known = ", ".join(sorted(choices))
            raise DriverConfigError(
                f"{name}: {value!r} has no franz-go equivalent (known: {known})"
            )
        return choices[key]

    return convert


def _balancers(name: str, value: Any) -> str:
    names = {
        "range": "range",
        "roundrobin": "roundrobin",
        "cooperative-sticky": "cooperative-sticky",
    }
    chosen = [n.strip() for n in str(value).split(",") if n.strip()]
    unknown = [n for n in chosen if n not in names]
    if unknown or not chosen:
        raise DriverConfigError(f"{name}: {unknown or value!r} has no franz-go balancer")
    return ",".join(names[n] for n in chosen)


def _debug(_: str, value: Any) -> str | None:
    return "debug" if str(value).strip() else None


_TRUE_FALSE = {"true": "true", "false": None}
COMMON: dict[str, tuple[str, Convert]] = {
    "bootstrap.servers": ("SeedBrokers", _text),
    "metadata.broker.list": ("SeedBrokers", _text),
    "client.id": ("ClientID", _text),
    "retry.backoff.ms": ("RetryBackoff", _ms),
    "metadata.max.age.ms": ("MetadataMaxAge", _ms),
    "socket.timeout.ms": ("RequestTimeoutOverhead", _ms),
    "debug": ("WithLogger", _debug),
}
PRODUCER: dict[str, tuple[str, Convert]] = {
    **COMMON,
    "enable.idempotence": ("DisableIdempotentWrite", _choice({"true": None, "false": "true"})),
    "acks": ("RequiredAcks", _choice({"all": "all", "-1": "all", "1": "leader", "0": "none"})),
    "request.required.acks": (
        "RequiredAcks",
        _choice({"all": "all", "-1": "all", "1": "leader", "0": "none"}),
    ),
    "max.in.flight.requests.per.connection": ("MaxProduceRequestsInflightPerBroker", _integer),
    "max.in.flight": ("MaxProduceRequestsInflightPerBroker", _integer),
    "retries": ("RecordRetries", _integer),
    "message.send.max.retries": ("RecordRetries", _integer),
    "linger.ms": ("ProducerLinger", _ms),
    "queue.buffering.max.ms": ("ProducerLinger", _ms),
    "message.timeout.ms": ("RecordDeliveryTimeout", _ms),
    "delivery.timeout.ms": ("RecordDeliveryTimeout", _ms),
    "request.timeout.ms": ("ProduceRequestTimeout", _ms),
    "transactional.id": ("TransactionalID", _text),
    "transaction.timeout.ms": ("TransactionTimeout", _ms),
    "compression.type": (
        "ProducerBatchCompression",
        _choice({c: c for c in ("none", "gzip", "snappy", "lz4", "zstd")}),
    ),
    "compression.codec": (
        "ProducerBatchCompression",
        _choice({c: c for c in ("none", "gzip", "snappy", "lz4", "zstd")}),
    ),
    "message.max.bytes": ("ProducerBatchMaxBytes", _integer),
    "batch.size": ("ProducerBatchMaxBytes", _integer),
}
CONSUMER: dict[str, tuple[str, Convert]] = {
    **COMMON,
    "group.id": ("ConsumerGroup", _text),
    "group.instance.id": ("InstanceID", _text),
    "group.protocol": ("ServerSideBalancer", _choice({"classic": None, "consumer": "true"})),
    "group.remote.assignor": ("Balancers", _choice({"range": "range", "uniform": "sticky"})),
    "enable.auto.commit": ("DisableAutoCommit", _choice({"true": None, "false": "true"})),
    "auto.commit.interval.ms": ("AutoCommitInterval", _ms),
    "auto.offset.reset": (
        "ConsumeResetOffset",
        _choice(
            {
                "earliest": "start",
                "smallest": "start",
                "beginning": "start",
                "latest": "end",
                "largest": "end",
                "end": "end",
            }
        ),
    ),
    "session.timeout.ms": ("SessionTimeout", _ms),
    "heartbeat.interval.ms": ("HeartbeatInterval", _ms),
    "max.poll.interval.ms": ("RebalanceTimeout", _ms),
    "isolation.level": (
        "FetchIsolationLevel",
        _choice({"read_committed": "read_committed", "read_uncommitted": "read_uncommitted"}),
    ),
    "partition.assignment.strategy": ("Balancers", _balancers),
}
CALLBACKS = frozenset({"stats_cb", "error_cb", "on_delivery", "on_commit", "logger"})
DRIVER_OWN = frozenset({"statistics.interval.ms", "enable.partition.eof"})
REFUSED = {
    "batch.num.messages": (
        "franz-go sizes batches in bytes only (ProducerBatchMaxBytes) and refuses a record larger "
        "than the limit rather than sending it alone"
    ),
}


def _translated(config: dict[str, Any], table: dict[str, tuple[str, Convert]]) -> dict[str, str]:
    native: dict[str, str] = {}
    for name, value in config.items():
        if name in CALLBACKS or name in DRIVER_OWN:
            continue
        if name in REFUSED:
            raise DriverConfigError(f"{name}: {value!r}: {REFUSED[name]}")
        if name not in table:
            raise DriverConfigError(f"{name}: librdkafka's property has no equivalent in franz-go")
        option, convert = table[name]
        converted = convert(name, value)
        if converted is not None:
            native[option] = converted
    return native


def producer(config: dict[str, Any]) -> tuple[dict[str, str], int]:
    """A producer's driver options and the driver's statistics interval (ms; 0: none)."""
    return _translated(config, PRODUCER), int(config.get("statistics.interval.ms", 0))


def consumer(config: dict[str, Any]) -> tuple[dict[str, str], int]:
    """A consumer's driver options (the end-of-partition events are the driver's own)."""
    native = _translated(config, CONSUMER)
    if "ServerSideBalancer" in native and config.get("partition.assignment.strategy") is not None:
        raise DriverConfigError(
            "partition.assignment.strategy: under group.protocol consumer the broker assigns "
            "(group.remote.assignor)"
        )
    return native, 0
