"""Producer ids handed out in blocks of 1000, like Kafka's ProducerIdManager (seed 001).

A block is claimed by a conditional write of the latest claimed block: in ZooKeeper a
versioned `set` of `/eoslab/refbroker/latest_producer_id_block` (Kafka's
`/latest_producer_id_block`, same JSON), retried on BadVersionError; without ZooKeeper a file
under the state directory, replaced atomically under an exclusive lock. Ids start at
1_000_000_000 so they never collide with the ids of the Kafka cluster the lab compares against.
"""

from __future__ import annotations

import fcntl
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from eoslab.refbroker.durable_files import write_atomically

BLOCK_SIZE = 1000  # ProducerIdManager.PidBlockSize
FIRST_PRODUCER_ID = 1_000_000_000
ZNODE = "/eoslab/refbroker/latest_producer_id_block"
BLOCK_FILE = "latest_producer_id_block.json"
MAX_CLAIM_ATTEMPTS = 100
ZOOKEEPER_TIMEOUT_S = 10.0


class ProducerIdsExhaustedError(Exception):
    pass


@dataclass(frozen=True)
class ProducerIdBlock:
    broker: int
    block_start: int
    block_end: int

    def to_json(self) -> bytes:
        """Kafka's znode format: ids as JSON strings."""
        return json.dumps(
            {
                "version": 1,
                "broker": self.broker,
                "block_start": str(self.block_start),
                "block_end": str(self.block_end),
            }
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> ProducerIdBlock:
        fields = json.loads(data)
        return cls(int(fields["broker"]), int(fields["block_start"]), int(fields["block_end"]))

    @classmethod
    def following(cls, latest: ProducerIdBlock | None, broker: int) -> ProducerIdBlock:
        start = (
            FIRST_PRODUCER_ID if latest is None else max(latest.block_end + 1, FIRST_PRODUCER_ID)
        )
        if start > 2**63 - 1 - BLOCK_SIZE:
            raise ProducerIdsExhaustedError(f"no producer id block after {latest}")
        return cls(broker, start, start + BLOCK_SIZE - 1)


class ProducerIdBlockStore(Protocol):
    def claim_block(self) -> ProducerIdBlock: ...

    def close(self) -> None: ...


class ZooKeeperBlockStore:
    """Claims blocks with a versioned conditional set of the znode, like Kafka's ZK mode."""

    def __init__(self, hosts: str, broker: int, path: str = ZNODE) -> None:
        self.broker = broker
        self.path = path
        self._zk = KazooClient(hosts=hosts, timeout=ZOOKEEPER_TIMEOUT_S)
        self._zk.start(timeout=ZOOKEEPER_TIMEOUT_S)

    def claim_block(self) -> ProducerIdBlock:
        for _ in range(MAX_CLAIM_ATTEMPTS):
            try:
                data, stat = self._zk.get(self.path)
            except NoNodeError:
                block = ProducerIdBlock.following(None, self.broker)
                try:
                    self._zk.create(self.path, block.to_json(), makepath=True)
                except NodeExistsError:
                    continue
                return block
            block = ProducerIdBlock.following(ProducerIdBlock.from_json(data), self.broker)
            try:
                self._zk.set(self.path, block.to_json(), version=stat.version)
            except BadVersionError:
                continue
            return block
        raise ProducerIdsExhaustedError(f"{MAX_CLAIM_ATTEMPTS} conflicting claims on {self.path}")

    def close(self) -> None:
        self._zk.stop()
        self._zk.close()


class FileBlockStore:
    """Claims blocks by rewriting a file under an exclusive lock, for runs without ZooKeeper."""

    def __init__(self, state_dir: Path, broker: int) -> None:
        self.broker = broker
        state_dir.mkdir(parents=True, exist_ok=True)
        self.path = state_dir / BLOCK_FILE
        self._lock_path = state_dir / (BLOCK_FILE + ".lock")

    def claim_block(self) -> ProducerIdBlock:
        with self._lock_path.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            latest = (
                ProducerIdBlock.from_json(self.path.read_bytes()) if self.path.exists() else None
            )
            block = ProducerIdBlock.following(latest, self.broker)
            write_atomically(self.path, block.to_json())
            return block

    def close(self) -> None:
        """Nothing is held between claims."""


class ProducerIdManager:
    def __init__(self, store: ProducerIdBlockStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._block: ProducerIdBlock | None = None
        self._next = 0

    def generate_producer_id(self) -> int:
        with self._lock:
            if self._block is None or self._next > self._block.block_end:
                self._block = self._store.claim_block()
                self._next = self._block.block_start
            producer_id = self._next
            self._next += 1
            return producer_id

    def close(self) -> None:
        self._store.close()


def producer_id_manager(
    zookeeper: str | None, state_dir: Path, broker_id: int = 0
) -> ProducerIdManager:
    """ZooKeeper-backed when `zookeeper` ("host:port") is given, file-backed otherwise."""
    if zookeeper:
        return ProducerIdManager(ZooKeeperBlockStore(zookeeper, broker_id))
    return ProducerIdManager(FileBlockStore(state_dir, broker_id))
