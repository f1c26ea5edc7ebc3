"""What the lab asks of a cluster through librdkafka's admin client: create a topic, find a
partition's leader, list the brokers, find the controller. One place for the workload, the
nemesis, the probe, the runtime's health checks and the CLI.

The controller: on a ZooKeeper cluster (Kafka 3.9) the brokers name the active controller in
their Metadata and DescribeCluster answers. On a KRaft cluster (Kafka 4) they name a random
live broker there (clients cannot reach the controllers); the active controller is the leader
of the metadata quorum, which DescribeQuorum (KIP-595) answers. librdkafka has no DescribeQuorum,
so :func:`metadata_quorum` sends it itself, to a broker, which forwards it to the active
controller (as Kafka's Admin.describeMetadataQuorum and kafka-metadata-quorum do).
:func:`finalized_features` likewise reads the cluster's finalized feature levels (KIP-584) from
a broker's ApiVersions answer, where clients read them (`transaction.version` 2: KIP-890's
transaction protocol v2), as `kafka-features describe` prints them.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.describe_quorum.v2.request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from kio.schema.describe_quorum.v2.response import DescribeQuorumResponse
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32

from eoslab.clock import wait_until
from eoslab.kafka_api import SIZE_PREFIX, decode_response, encode_request
from eoslab.settings import HostPort

TOPIC_READY_TIMEOUT_S = 60.0
LEADER_LOOKUP_TIMEOUT_S = 30.0
Response = TypeVar("Response")


class LeaderLookupError(RuntimeError):
    """A partition without a leader, or a group without a coordinator, within the bound."""


def admin_client(bootstrap: str, timeout_ms: int = 5000) -> AdminClient:
    """A quiet admin client whose every request is bounded by ``timeout_ms``."""
    return AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "socket.timeout.ms": timeout_ms,
            "socket.connection.setup.timeout.ms": timeout_ms,
            "log_level": 0,
        }
    )


def metadata_brokers(bootstrap: str, timeout_s: float = 3.0) -> set[int]:
    """Broker ids in a metadata response obtained through ``bootstrap``; empty when unreachable."""
    try:
        return set(admin_client(bootstrap).list_topics(timeout=timeout_s).brokers)
    except KafkaException:
        return set()


@dataclass(frozen=True)
class Leader:
    """A partition's leader as its metadata advertises it."""

    broker_id: int
    host: str
    port: int
    replicas: tuple[int, ...] = ()

    @property
    def followers(self) -> tuple[int, ...]:
        """The partition's other replicas."""
        return tuple(r for r in self.replicas if r != self.broker_id)


def find_leader(
    bootstrap: str, topic: str, partition: int, timeout_s: float = LEADER_LOOKUP_TIMEOUT_S
) -> Leader:
    """The leader of ``topic[partition]``, polled until metadata names one (a new topic, an
    election); raises :class:`LeaderLookupError` after ``timeout_s``."""
    client = admin_client(bootstrap)
    problem = ["no answer"]

    def lookup() -> Leader | None:
        try:
            metadata = client.list_topics(topic, timeout=5)
        except KafkaException as error:
            problem[0] = str(error)
            return None
        described = metadata.topics.get(topic)
        if described is None or described.error is not None:
            problem[0] = f"topic {topic}: {described.error if described else 'unknown'}"
            return None
        found = described.partitions.get(partition)
        if found is None or found.leader < 0 or found.leader not in metadata.brokers:
            problem[0] = f"{topic}[{partition}] has no leader yet"
            return None
        broker = metadata.brokers[found.leader]
        replicas = tuple(int(r) for r in found.replicas)
        return Leader(found.leader, str(broker.host), int(broker.port), replicas)

    leader = wait_until(lookup, timeout_s, interval_s=0.2)
    if leader is None:
        raise LeaderLookupError(
            f"no leader for {topic}[{partition}] after {timeout_s:.0f} s: {problem[0]}"
        )
    return leader


def group_coordinator(
    bootstrap: str, group: str, timeout_s: float = LEADER_LOOKUP_TIMEOUT_S
) -> int:
    """The broker id coordinating consumer group ``group`` now (FindCoordinator, through
    DescribeGroups), polled while no coordinator is available (one just died)."""
    client = admin_client(bootstrap)
    problem = ["no answer"]

    def lookup() -> tuple[int] | None:
        try:
            described = client.describe_consumer_groups([group], request_timeout=5)[group]
            coordinator = described.result(timeout=10).coordinator
        except KafkaException as error:
            problem[0] = str(error)
            return None
        return None if coordinator is None else (int(coordinator.id),)

    found = wait_until(lookup, timeout_s, interval_s=0.2)
    if found is None:
        raise LeaderLookupError(
            f"no coordinator for group {group} after {timeout_s:.0f} s: {problem[0]}"
        )
    return found[0]


def cluster_controller(bootstrap: str, timeout_s: float = LEADER_LOOKUP_TIMEOUT_S) -> int:
    """The controller a cluster's brokers name (DescribeCluster), polled while they name none:
    on a ZooKeeper cluster the active controller; not on a KRaft one (see the module
    docstring: :func:`quorum_leader`)."""
    client = admin_client(bootstrap)
    problem = ["no answer"]

    def lookup() -> tuple[int] | None:
        try:
            controller = client.describe_cluster(request_timeout=5).result(timeout=10).controller
        except KafkaException as error:
            problem[0] = str(error)
            return None
        return None if controller is None else (int(controller.id),)

    found = wait_until(lookup, timeout_s, interval_s=0.2)
    if found is None:
        raise LeaderLookupError(
            f"no controller at {bootstrap} after {timeout_s:.0f} s: {problem[0]}"
        )
    return found[0]


METADATA_TOPIC = "__cluster_metadata"
"""The KRaft metadata log: one partition, replicated by the quorum's voters."""


@dataclass(frozen=True)
class MetadataQuorum:
    """The KRaft metadata quorum as DescribeQuorum answers: its leader (the active controller,
    -1 while an election runs), the leader's epoch and the voters."""

    leader_id: int
    leader_epoch: int
    voters: frozenset[int]


def metadata_quorum(bootstrap: str, timeout_s: float = 3.0) -> MetadataQuorum | None:
    """The metadata quorum, from the first broker of ``bootstrap`` that answers DescribeQuorum;
    None when none does (a ZooKeeper cluster answers none: it has no quorum)."""
    request = DescribeQuorumRequest(
        topics=(
            TopicData(
                topic_name=TopicName(METADATA_TOPIC),
                partitions=(PartitionData(partition_index=i32(0)),),
            ),
        )
    )
    for address in bootstrap.split(","):
        try:
            response = _exchange(
                HostPort.parse(address), request, DescribeQuorumResponse, timeout_s
            )
        except (OSError, ValueError):
            continue
        if response.error_code != ErrorCode.none:
            continue
        (partition,) = response.topics[0].partitions
        if partition.error_code != ErrorCode.none:
            continue
        return MetadataQuorum(
            leader_id=int(partition.leader_id),
            leader_epoch=int(partition.leader_epoch),
            voters=frozenset(int(v.replica_id) for v in partition.current_voters),
        )
    return None


def finalized_features(bootstrap: str, timeout_s: float = 3.0) -> dict[str, int] | None:
    """The cluster-wide finalized feature levels (name: max level) from the first broker of
    ``bootstrap`` that answers ApiVersions v3; ``{}`` when it finalizes none (the reference
    broker advertises no feature), None when no broker answers."""
    request = ApiVersionsRequest(client_software_name="eoslab-admin", client_software_version="1")
    for address in bootstrap.split(","):
        try:
            response = _exchange(HostPort.parse(address), request, ApiVersionsResponse, timeout_s)
        except (OSError, ValueError):
            continue
        if response.error_code != ErrorCode.none:
            continue
        if response.finalized_features_epoch < 0:  # "unknown": the levels are not valid
            return {}
        return {f.name: int(f.max_version_level) for f in response.finalized_features}
    return None


def _exchange(
    address: HostPort, request: Any, response_type: type[Response], timeout_s: float
) -> Response:
    """One request and its response on a connection of its own (ValueError: a frame that is
    not the answer)."""
    with socket.create_connection((address.host, address.port), timeout=timeout_s) as conn:
        conn.sendall(encode_request(request, correlation_id=0, client_id="eoslab-admin"))
        (size,) = SIZE_PREFIX.unpack(_read(conn, SIZE_PREFIX.size))
        response: Response = decode_response(_read(conn, size), response_type)
        return response


def _read(conn: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)


def quorum_leader(bootstrap: str, timeout_s: float = LEADER_LOOKUP_TIMEOUT_S) -> int:
    """The active controller of a KRaft cluster (its metadata quorum's leader), polled while an
    election runs."""

    def lookup() -> tuple[int] | None:
        quorum = metadata_quorum(bootstrap)
        return None if quorum is None or quorum.leader_id < 0 else (quorum.leader_id,)

    found = wait_until(lookup, timeout_s, interval_s=0.2)
    if found is None:
        raise LeaderLookupError(f"no metadata quorum leader at {bootstrap} after {timeout_s:.0f} s")
    return found[0]


def active_controller(bootstrap: str, *, kraft: bool) -> int:
    """The node id of a cluster's active controller now: the metadata quorum's leader on a
    KRaft cluster, the controller its brokers name on a ZooKeeper one."""
    return quorum_leader(bootstrap) if kraft else cluster_controller(bootstrap)


def leader_of(bootstrap: str, topic: str, partition: int) -> int:
    """The broker id leading ``topic[partition]`` now."""
    return find_leader(bootstrap, topic, partition).broker_id


ISOLATIONS = {
    "read_uncommitted": IsolationLevel.READ_UNCOMMITTED,
    "read_committed": IsolationLevel.READ_COMMITTED,
}


def end_offsets(
    cluster: str | AdminClient,
    topic: str,
    partitions: int | Iterable[int],
    isolation: str = "read_uncommitted",
    timeout_s: float = 30.0,
) -> dict[int, int]:
    """ListOffsets(latest) per partition as a reader at ``isolation`` sees it: the high
    watermarks (read_uncommitted), the last stable offsets (read_committed). ``cluster``: a
    bootstrap, or an admin client to reuse (a watch asking often); ``partitions``: how many
    (0..n-1), or which."""
    client = admin_client(cluster, int(timeout_s * 1000)) if isinstance(cluster, str) else cluster
    wanted = range(partitions) if isinstance(partitions, int) else partitions
    futures = client.list_offsets(
        {TopicPartition(topic, p): OffsetSpec.latest() for p in wanted},
        isolation_level=ISOLATIONS[isolation],
        request_timeout=timeout_s,
    )
    return {tp.partition: int(f.result(timeout=timeout_s).offset) for tp, f in futures.items()}


def committed_offsets(
    cluster: str | Consumer,
    group: str,
    topic: str,
    partitions: int | Iterable[int],
    timeout_s: float = 10.0,
) -> dict[int, int]:
    """Group ``group``'s committed offset per partition of ``topic`` as its coordinator has it
    now, asked without joining the group (a partition never committed is left out; a
    KafkaException when the coordinator does not answer, or answers a partition with an error:
    its offset is then -1001 too, and must not pass for "never committed"). ``cluster``: a
    bootstrap, or a consumer of the group that never joins it, to reuse (a watch asking
    often)."""
    reader = (
        Consumer({"bootstrap.servers": cluster, "group.id": group, "log_level": 3})
        if isinstance(cluster, str)
        else cluster
    )
    wanted = range(partitions) if isinstance(partitions, int) else partitions
    try:
        answered = reader.committed([TopicPartition(topic, p) for p in wanted], timeout=timeout_s)
    finally:
        if reader is not cluster:
            reader.close()
    for tp in answered:
        if tp.error is not None:
            raise KafkaException(tp.error)
    return {tp.partition: int(tp.offset) for tp in answered if tp.offset >= 0}


HIGH_WATERMARK = -1
"""DeleteRecords' offset for "the high watermark when the broker deletes"."""


def delete_records(bootstrap: str, topic: str, partitions: list[int]) -> dict[int, int]:
    """DeleteRecords up to each partition's high watermark as the broker sees it when it
    deletes (the log start offset moves past every record, as retention would, and past the
    last batch of every producer); the new log start offsets by partition."""
    client = admin_client(bootstrap, timeout_ms=30_000)
    ends = [TopicPartition(topic, p, HIGH_WATERMARK) for p in partitions]
    futures = client.delete_records(ends, request_timeout=30, operation_timeout=30)
    return {tp.partition: int(f.result(timeout=60).low_watermark) for tp, f in futures.items()}


def topic_exists(bootstrap: str, topic: str) -> bool:
    """Whether the cluster knows ``topic`` (KafkaException when it cannot be asked)."""
    described = admin_client(bootstrap).list_topics(topic, timeout=10).topics.get(topic)
    return described is not None and described.error is None


def delete_topic(bootstrap: str, topic: str, timeout_s: float = 30.0) -> bool:
    """Delete a topic; False when it was already gone (KafkaException for anything else).
    Returns once no broker of ``bootstrap`` names it any more: DeleteTopics answers when the
    broker that took the request has forgotten it, and the others learn it a moment later (in
    ZooKeeper mode from the controller's UpdateMetadata), so a caller's next look may land on one
    that still does (TimeoutError when one still does after ``timeout_s``)."""
    client = admin_client(bootstrap, timeout_ms=30_000)
    future = client.delete_topics([topic], operation_timeout=30)[topic]
    try:
        future.result(timeout=60)
    except KafkaException as error:
        if error.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return False
        raise
    if not wait_until(lambda: not _named_by_a_broker(bootstrap, topic), timeout_s, 0.1):
        raise TimeoutError(f"topic {topic} deleted but still named by a broker after {timeout_s} s")
    return True


def _named_by_a_broker(bootstrap: str, topic: str) -> bool:
    """Whether a broker of ``bootstrap`` still names ``topic``; each is asked by a fresh client
    with its address alone (which asks that broker first); one that cannot be asked names
    nothing to anybody."""
    for one in bootstrap.split(","):
        try:
            if topic_exists(one, topic):
                return True
        except KafkaException:
            continue
    return False


def create_topic(bootstrap: str, topic: str, partitions: int, replication: int) -> None:
    """Create a topic (an existing one is fine) and wait until every partition has a leader."""
    client = admin_client(bootstrap, timeout_ms=30_000)
    futures = client.create_topics([NewTopic(topic, partitions, replication)], operation_timeout=30)
    try:
        futures[topic].result(timeout=TOPIC_READY_TIMEOUT_S)
    except KafkaException as error:
        if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise

    def ready() -> bool:
        try:
            described = client.list_topics(topic, timeout=10).topics.get(topic)
        except KafkaException:
            return False
        return bool(
            described
            and described.error is None
            and len(described.partitions) == partitions
            and all(p.leader >= 0 for p in described.partitions.values())
        )

    if not wait_until(ready, TOPIC_READY_TIMEOUT_S, interval_s=0.2):
        raise TimeoutError(
            f"topic {topic} has no leader for every partition after {TOPIC_READY_TIMEOUT_S:.0f} s"
        )


class BrokerConfigError(ValueError):
    """A broker config a run cannot set: unknown to the cluster's release, or not dynamic."""


def _broker_config(client: AdminClient, broker: int, timeout_s: float) -> dict[str, Any]:
    resource = ConfigResource(ResourceType.BROKER, str(broker))
    (future,) = client.describe_configs([resource]).values()
    entries: dict[str, Any] = future.result(timeout_s)
    return entries


def set_broker_configs(
    bootstrap: str, configs: dict[str, str], timeout_s: float = 30.0
) -> dict[str, str | None]:
    """Set ``configs`` on every broker of the cluster, dynamically (IncrementalAlterConfigs, per
    broker: librdkafka takes one broker resource a call); returns what each had set dynamically
    before (None: nothing), for :func:`restore_broker_configs`. BrokerConfigError, before
    anything is set, for a config the brokers do not know (Kafka accepts any name and ignores
    it) or one they only read at start (its DescribeConfigs says read-only)."""
    client = admin_client(bootstrap, timeout_ms=int(timeout_s * 1000))
    brokers = sorted(client.list_topics(timeout=timeout_s).brokers)
    described = _broker_config(client, brokers[0], timeout_s)
    for name in configs:
        if name not in described:
            raise BrokerConfigError(f"broker config {name}: unknown to this cluster's brokers")
        if described[name].is_read_only:
            raise BrokerConfigError(
                f"broker config {name}: not dynamic (the brokers read it at start only)"
            )
    previous = {
        name: described[name].value if _dynamic(described[name]) else None for name in configs
    }
    _alter(client, brokers, {name: (value, True) for name, value in configs.items()}, timeout_s)
    return previous


def restore_broker_configs(
    bootstrap: str, previous: dict[str, str | None], timeout_s: float = 30.0
) -> None:
    """Put back what :func:`set_broker_configs` changed: the earlier dynamic value, or none."""
    client = admin_client(bootstrap, timeout_ms=int(timeout_s * 1000))
    brokers = sorted(client.list_topics(timeout=timeout_s).brokers)
    _alter(
        client,
        brokers,
        {name: (value, value is not None) for name, value in previous.items()},
        timeout_s,
    )


def _alter(
    client: AdminClient,
    brokers: Iterable[int],
    changes: dict[str, tuple[str | None, bool]],
    timeout_s: float,
) -> None:
    """Set (True) or delete (False) dynamic broker configs on each broker."""
    entries = [
        ConfigEntry(
            name,
            value if keep else None,
            incremental_operation=AlterConfigOpType.SET if keep else AlterConfigOpType.DELETE,
        )
        for name, (value, keep) in changes.items()
    ]
    for broker in brokers:
        resource = ConfigResource(ResourceType.BROKER, str(broker), incremental_configs=entries)
        for future in client.incremental_alter_configs([resource]).values():
            future.result(timeout_s)
    # The answer is not the config in effect: on ZooKeeper a broker applies a change when
    # ZooKeeper notifies it of its own write, on KRaft when the metadata log reaches it (a CI
    # run's describe right after a put-back read the old value on one broker of three).
    if not wait_until(
        lambda: all(
            in_effect(_broker_config(client, broker, timeout_s), changes) for broker in brokers
        ),
        timeout_s,
    ):
        raise KafkaException(
            KafkaError(
                KafkaError._TIMED_OUT,
                f"broker configs {sorted(changes)}: not in effect on every broker after "
                f"{timeout_s:g} s",
            )
        )


def in_effect(
    described: dict[str, ConfigEntry], changes: dict[str, tuple[str | None, bool]]
) -> bool:
    """Whether a broker's described configs show ``changes`` (name: value, set or deleted) in
    effect: a set one as a dynamic config of that broker with that value, a deleted one no longer
    dynamic for it."""
    return all(
        _dynamic(described[name]) and described[name].value == value
        if keep
        else not _dynamic(described[name])
        for name, (value, keep) in changes.items()
    )


def _dynamic(entry: ConfigEntry) -> bool:
    """Set dynamically on that broker (DescribeConfigs gives the source as a number)."""
    return ConfigSource(entry.source) == ConfigSource.DYNAMIC_BROKER_CONFIG
