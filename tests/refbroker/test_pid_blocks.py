"""Producer id blocks from a file and from a real ZooKeeper (started from the Kafka jars)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from eoslab.refbroker.pid_blocks import (
    BLOCK_SIZE,
    FIRST_PRODUCER_ID,
    ZNODE,
    FileBlockStore,
    ProducerIdBlock,
    ZooKeeperBlockStore,
    producer_id_manager,
)
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.topology import LabConfig

# A ZooKeeper of these tests' own (no broker), beside the session lab.
ZOOKEEPER_PORT_OFFSET = int(os.environ.get("EOSLAB_TEST_PORT_OFFSET", "1000")) + 4200


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    config = LabConfig(
        state_dir=tmp_path_factory.mktemp("zk"),
        port_offset=ZOOKEEPER_PORT_OFFSET,
        targets=(),
        with_zookeeper=True,
        with_postgres=False,
        with_spark_connect=False,
        with_airflow=False,
    )
    lab = LocalRuntime(config)
    lab.up()
    try:
        yield config.zookeeper_connect
    finally:
        lab.down()


def test_file_store_hands_out_blocks_of_1000_from_the_base(tmp_path: Path) -> None:
    manager = producer_id_manager(None, tmp_path)
    ids = [manager.generate_producer_id() for _ in range(BLOCK_SIZE + 5)]
    assert ids == list(range(FIRST_PRODUCER_ID, FIRST_PRODUCER_ID + BLOCK_SIZE + 5))
    latest = json.loads((tmp_path / "latest_producer_id_block.json").read_text())
    assert latest == {
        "version": 1,
        "broker": 0,
        "block_start": str(FIRST_PRODUCER_ID + BLOCK_SIZE),
        "block_end": str(FIRST_PRODUCER_ID + 2 * BLOCK_SIZE - 1),
    }
    restarted = producer_id_manager(None, tmp_path)
    assert restarted.generate_producer_id() == FIRST_PRODUCER_ID + 2 * BLOCK_SIZE


def test_file_stores_claiming_concurrently_get_disjoint_blocks(tmp_path: Path) -> None:
    stores = [FileBlockStore(tmp_path, broker) for broker in range(4)]
    with ThreadPoolExecutor(4) as pool:
        blocks = list(pool.map(lambda s: [s.claim_block() for _ in range(20)], stores))
    assert_disjoint_and_contiguous([b for per_store in blocks for b in per_store])


def assert_disjoint_and_contiguous(blocks: list[ProducerIdBlock]) -> None:
    starts = sorted(b.block_start for b in blocks)
    assert starts == [FIRST_PRODUCER_ID + i * BLOCK_SIZE for i in range(len(blocks))]
    assert all(b.block_end == b.block_start + BLOCK_SIZE - 1 for b in blocks)


def test_zookeeper_managers_claiming_concurrently_get_disjoint_ids(zookeeper: str) -> None:
    managers = [
        producer_id_manager(zookeeper, Path("/nonexistent"), broker_id=b) for b in (1, 2, 3)
    ]
    try:
        with ThreadPoolExecutor(3) as pool:
            ids = list(
                pool.map(lambda m: [m.generate_producer_id() for _ in range(2500)], managers)
            )
    finally:
        for manager in managers:
            manager.close()
    everything = [pid for per_manager in ids for pid in per_manager]
    assert len(set(everything)) == len(everything) == 7500
    assert min(everything) == FIRST_PRODUCER_ID
    client = KazooClient(hosts=zookeeper)
    client.start(timeout=10)
    try:
        data, stat = client.get(ZNODE)
    finally:
        client.stop()
        client.close()
    latest = json.loads(data)
    assert set(latest) == {"version", "broker", "block_start", "block_end"}
    assert int(latest["block_end"]) == FIRST_PRODUCER_ID + 9 * BLOCK_SIZE - 1  # 3 blocks each
    assert stat.version == 8  # created once, then one successful versioned set per claim


def test_zookeeper_store_retries_a_lost_race(zookeeper: str) -> None:
    """A claim whose versioned set loses against another broker reads again and moves on."""
    first = ZooKeeperBlockStore(zookeeper, broker=7, path="/eoslab/test/race")
    second = ZooKeeperBlockStore(zookeeper, broker=8, path="/eoslab/test/race")
    try:
        original_get = first._zk.get
        raced = []

        def get_then_lose_the_race(path: str):
            data, stat = original_get(path)
            if not raced:
                raced.append(second.claim_block())
            return data, stat

        first.claim_block()
        first._zk.get = get_then_lose_the_race
        won = first.claim_block()
    finally:
        first.close()
        second.close()
    assert raced[0].block_start == FIRST_PRODUCER_ID + BLOCK_SIZE
    assert won.block_start == FIRST_PRODUCER_ID + 2 * BLOCK_SIZE
