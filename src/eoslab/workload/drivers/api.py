"""The client as the roles see it: librdkafka's API (confluent-kafka's Producer and Consumer),
whatever client the session runs. :class:`ClientApi` makes a session's producers and consumers:
confluent-kafka's own for librdkafka, :mod:`eoslab.workload.drivers.remote`'s for a driver
program (its configuration translated from librdkafka's properties by the client's folder).

The protocols below are the part of librdkafka's API the roles use; both kinds of client have
it. Errors are confluent-kafka's KafkaError and KafkaException for every client (a driver's
error codes are Kafka's, or librdkafka's numbers for its local conditions).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from eoslab.clients import ClientLaunch
from eoslab.workload.drivers.remote import DriverProcess, RemoteConsumer, RemoteProducer, Translate

DeliveryCallback = Callable[[KafkaError | None, Message], None]
RebalanceCallback = Callable[[Any, list[TopicPartition]], None]


class ProducerApi(Protocol):
    def produce(
        self,
        topic: str,
        value: str | bytes | None = None,
        key: str | bytes | None = None,
        partition: int = -1,
        *,
        on_delivery: DeliveryCallback | None = None,
    ) -> None: ...

    def poll(self, timeout: float = -1) -> int: ...

    def flush(self, timeout: float = -1) -> int: ...

    def purge(
        self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True
    ) -> None: ...

    def __len__(self) -> int: ...

    def init_transactions(self, timeout: float = -1) -> None: ...

    def begin_transaction(self) -> None: ...

    def commit_transaction(self, timeout: float = -1) -> None: ...

    def abort_transaction(self, timeout: float = -1) -> None: ...

    def send_offsets_to_transaction(
        self, positions: list[TopicPartition], group_metadata: Any, timeout: float = -1
    ) -> None: ...


class CommitAnswer(Protocol):
    """One partition of a synchronous commit's answer."""

    @property
    def partition(self) -> int: ...

    @property
    def error(self) -> KafkaError | None: ...


class ConsumerApi(Protocol):
    def subscribe(
        self,
        topics: list[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None: ...

    def assign(self, partitions: list[TopicPartition]) -> None: ...

    def poll(self, timeout: float = -1) -> Message | None: ...

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]: ...

    def commit(
        self, *, offsets: list[TopicPartition], asynchronous: Literal[False]
    ) -> Sequence[CommitAnswer]: ...

    def committed(
        self, partitions: list[TopicPartition], timeout: float = -1
    ) -> list[TopicPartition]: ...

    def seek(self, partition: TopicPartition) -> None: ...

    def pause(self, partitions: list[TopicPartition]) -> None: ...

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]: ...

    def consumer_group_metadata(self) -> Any: ...

    def close(self) -> None: ...


def _translator(launch: ClientLaunch, role: Literal["producer", "consumer"]) -> Translate:
    """The client's translation of librdkafka's properties (its folder's ``config``)."""
    if launch.family == "java":
        from eoslab.workload.drivers.java import config as java

        return java.producer if role == "producer" else java.consumer
    from eoslab.workload.drivers.franz_go import config as franz_go

    return franz_go.producer if role == "producer" else franz_go.consumer


class ClientApi:
    """A session's client: librdkafka in the process (``launch`` None or librdkafka's), or a
    driver program started on first use and shared by the session's producers and consumers."""

    def __init__(self, launch: ClientLaunch | None) -> None:
        self.launch = None if launch is None or launch.family == "librdkafka" else launch
        self._driver: DriverProcess | None = None

    @property
    def remote(self) -> bool:
        return self.launch is not None

    def _started(self) -> DriverProcess:
        assert self.launch is not None
        if self._driver is None:
            self._driver = DriverProcess(self.launch)
        return self._driver

    def producer(
        self, config: dict[str, Any], *, for_consumer: ConsumerApi | None = None
    ) -> ProducerApi:
        """A producer; ``for_consumer``: the group consumer whose offsets it sends in its
        transactions (a copier's), which a client may need to know when it is made."""
        if self.launch is None:
            return Producer(config)
        paired = for_consumer if isinstance(for_consumer, RemoteConsumer) else None
        return RemoteProducer(self._started(), config, _translator(self.launch, "producer"), paired)

    def consumer(self, config: dict[str, Any]) -> ConsumerApi:
        if self.launch is None:
            return Consumer(config)
        return RemoteConsumer(self._started(), config, _translator(self.launch, "consumer"))

    @property
    def family(self) -> str:
        return "librdkafka" if self.launch is None else self.launch.family

    def log_error(self, error: KafkaError) -> None:
        """An error the client reported (librdkafka's error callback, a driver's error line),
        on the session's log under the client's name."""
        print(f"{self.family}: {error.name()}: {error.str()}", file=sys.stderr, flush=True)

    @property
    def version(self) -> str | None:
        """The version the driver program says its client is (None before it started)."""
        return None if self._driver is None else self._driver.version

    def close(self) -> None:
        """End the driver program (the session's clients are closed or abandoned)."""
        if self._driver is not None:
            self._driver.close()
            self._driver = None


def halt(signum: signal.Signals) -> None:
    """Stop (SIGSTOP) or kill (SIGKILL) this session process and its driver program at once:
    the session's process group when it leads one (as the supervisor starts it), else itself."""
    pid = os.getpid()
    if os.getpgid(0) == pid:
        os.killpg(pid, signum)
    else:
        os.kill(pid, signum)
