"""A nemesis killed mid-partition leaves its cuts behind, and the lab heals them: `lab status`
lists them, `lab up` of the same lab (its port offset: the same cgroups) removes them and says
so, `lab down` leaves nothing cut. On a Kafka 3.9 lab of its own (the session lab is not
brought down), with a real `eoslab run` of leader-isolated killed -9 while its partition is in
place."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from eoslab.clock import wait_until
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.netfaults import LabNetwork, cgroup2_root
from eoslab.runtime.processes import processes_of
from eoslab.runtime.topology import LabConfig

pytestmark = pytest.mark.lab

OFFSET = int(os.environ.get("EOSLAB_TEST_PORT_OFFSET", "1000")) + 1600


def kafka_lab(state_dir: Path) -> LocalRuntime:
    return LocalRuntime(
        LabConfig(
            state_dir=state_dir,
            port_offset=OFFSET,
            targets=("kafka",),
            with_postgres=False,
            with_spark_connect=False,
            with_airflow=False,
        )
    )


LINKS = 5
"""leader-isolated on Kafka 3.9: the leader cut from two followers and ZooKeeper, and the
followers from it (ZooKeeper opens no connection)."""


def kill_a_run_mid_partition(lab: LocalRuntime, runs: Path) -> list[str]:
    """`eoslab run leader-isolated` on the lab, killed -9 (with its producers: its process
    group) once its partition is in place (its links are cut in one transaction: all or
    none); the cuts it left, as `lab status` lists them."""
    env = {
        **os.environ,
        "EOSLAB_LAB_DIR": str(lab.config.state_dir),
        "EOSLAB_PORT_OFFSET": str(OFFSET),
        "EOSLAB_TARGETS": "kafka",
        "EOSLAB_RUNS_DIR": str(runs),
    }
    eoslab = Path(sys.executable).parent / "eoslab"
    run = subprocess.Popen(
        [str(eoslab), "run", "leader-isolated", "--target", "kafka", "--records", "3000"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert wait_until(lambda: lab.network().active(), 60.0, interval_s=0.2), "no partition"
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    return lab.status().cuts


@pytest.fixture
def nothing_left_cut() -> Iterator[None]:
    """Whatever becomes of the test, no cut of its labs (their port offset) outlives it."""
    yield
    config = LabConfig(state_dir=Path("/nonexistent"), port_offset=OFFSET, targets=("kafka",))
    network = LabNetwork(config)
    network.clear()
    network.remove_cgroups()


@pytest.mark.usefixtures("nothing_left_cut")
def test_a_nemesis_killed_mid_partition_is_healed_by_lab_up_and_lab_down(tmp_path: Path) -> None:
    first = kafka_lab(tmp_path / "first")
    first.up()
    try:
        left = kill_a_run_mid_partition(first, tmp_path / "runs")
        assert len(left) == LINKS, left
        assert all("leader-isolated" in cut for cut in left)
    finally:
        # the whole lab dies too (a test session killed -9), its state with it
        dying = processes_of(first.config.state_dir)
        for process in dying:
            process.kill()
        psutil.wait_procs(dying, timeout=30)
    second = kafka_lab(tmp_path / "second")  # the same offset: the same cgroups and chain
    status = second.up()
    try:
        assert [c.split(" (by")[0] for c in status.removed_cuts] == [
            c.split(" (by")[0] for c in left
        ]
        assert status.cuts == []
        assert second.network().active() == []
        assert kill_a_run_mid_partition(second, tmp_path / "runs")
    finally:
        second.down(purge=True)
    network = second.network()
    assert network.active() == []
    listed = subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=True)
    assert network.chain not in listed.stdout
    root = cgroup2_root()
    assert root is not None
    assert not (root / network.group).exists()
