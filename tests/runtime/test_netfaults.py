"""The network fault primitive on this machine's loopback, without Kafka: processes started in
the lab's cgroups (as the lab starts its nodes) talk to a listener on a node's port; a cut link
drops one process's packets and no other's (another node of the lab, another lab's node of the
same name, root), existing connections included, and is always removed; a slow link holds them
for its delay (and lets them through once its program is gone), a lossy one drops some."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from eoslab.clock import wait_until
from eoslab.runtime.linkdelay import Delayer
from eoslab.runtime.netfaults import Hold, LabNetwork, Link, Loss, NetworkFaultError
from eoslab.runtime.topology import LabConfig

TEST_PORT_OFFSET = int(os.environ.get("EOSLAB_TEST_PORT_OFFSET", "1000"))
OFFSET = TEST_PORT_OFFSET + 1700
"""A lab of its own: no process of the session lab is in its cgroups."""
OTHER_OFFSET = TEST_PORT_OFFSET + 1800
"""Another lab, whose nodes have the same names."""
CLIENT = """
import socket, sys, time
connection = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
connection.settimeout(1.0)
while True:
    try:
        sent = time.monotonic()
        connection.sendall(b"x")
        answer = connection.recv(1)
        slow = time.monotonic() - sent >= 0.1
        print(("slow" if slow else "ok") if answer == b"x" else "closed", flush=True)
    except OSError as error:
        print(type(error).__name__, flush=True)
    time.sleep(0.2)
"""
"""A client of a node: ``ok`` for each answer within 100 ms, ``slow`` for a later one."""
CONNECT_ONCE = """
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2).close()
    print("connected")
except OSError as error:
    print(type(error).__name__)
"""


def config(offset: int, tmp_path: Path) -> LabConfig:
    return LabConfig(
        state_dir=tmp_path / f"lab-{offset}",
        port_offset=offset,
        targets=("kafka",),
        with_postgres=False,
        with_spark_connect=False,
        with_airflow=False,
    )


@pytest.fixture
def network(tmp_path: Path) -> Iterator[LabNetwork]:
    network = LabNetwork(config(OFFSET, tmp_path))
    if network.unavailable():
        pytest.fail(f"these tests run as root: {network.unavailable()}")
    try:
        yield network
    finally:
        network.clear()
        network.remove_cgroups()


@pytest.fixture
def echo_port(network: LabNetwork) -> Iterator[int]:
    """An echo server (root's: in no cgroup of a lab) on kafka-2's inter-broker port."""
    port = network.config.service("kafka-2").ports["internal"]
    server = socket.create_server(("127.0.0.1", port))

    def serve() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=echo, args=(connection,), daemon=True).start()

    def echo(connection: socket.socket) -> None:
        with connection, contextlib.suppress(OSError):  # a client killed mid-talk
            while data := connection.recv(64):
                connection.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield port
    finally:
        server.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread, which holds the socket
        server.close()


@dataclass
class Client:
    """A process of one lab node, talking to the echo server on one connection."""

    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.strip())

    def sees(self, answer: str, timeout_s: float = 15.0) -> bool:
        """Whether the client's answers turn to ``answer`` (three in a row) within the bound."""
        start = len(self.lines)
        return bool(
            wait_until(lambda: self.lines[start:][-3:] == [answer] * 3, timeout_s, interval_s=0.1)
        )


def in_cgroup(network: LabNetwork, service: str, script: str, port: int) -> list[str]:
    return network.enter(network.config.service(service), [sys.executable, "-c", script, str(port)])


@pytest.fixture
def clients(network: LabNetwork, echo_port: int, tmp_path: Path) -> Iterator[dict[str, Client]]:
    """kafka-1 and kafka-3 of this lab, kafka-1 of another lab: each a connected client."""
    other = LabNetwork(config(OTHER_OFFSET, tmp_path))
    started = {
        "kafka-1": in_cgroup(network, "kafka-1", CLIENT, echo_port),
        "kafka-3": in_cgroup(network, "kafka-3", CLIENT, echo_port),
        "other lab's kafka-1": in_cgroup(other, "kafka-1", CLIENT, echo_port),
    }
    running = {
        name: Client(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True))
        for name, argv in started.items()
    }
    try:
        for name, client in running.items():
            assert client.sees("ok"), f"{name} never talked: {client.lines}"
        yield running
    finally:
        for client in running.values():
            client.process.kill()
            client.process.wait()
        other.remove_cgroups()


def test_nodes_start_in_their_own_cgroups(network: LabNetwork, clients: dict[str, Client]) -> None:
    assert network.members("kafka-1") == [clients["kafka-1"].process.pid]
    assert network.members("kafka-3") == [clients["kafka-3"].process.pid]
    assert network.members("kafka-2") == []
    cgroup = Path(f"/proc/{clients['kafka-1'].process.pid}/cgroup").read_text()
    assert f"/eoslab-{OFFSET}/kafka-1" in cgroup


def test_a_cut_drops_one_process_packets_and_no_other(
    network: LabNetwork, clients: dict[str, Client], echo_port: int
) -> None:
    network.cut([Link("kafka-1", "kafka-2")], "test-cut")
    try:
        # the established connection stops carrying what kafka-1 sends
        assert clients["kafka-1"].sees("TimeoutError"), clients["kafka-1"].lines[-5:]
        # kafka-3, another lab's kafka-1 and root talk on
        assert clients["kafka-3"].sees("ok")
        assert clients["other lab's kafka-1"].sees("ok")
        socket.create_connection(("127.0.0.1", echo_port), timeout=2).close()
        # a new connection from kafka-1 is not even opened
        once = in_cgroup(network, "kafka-1", CONNECT_ONCE, echo_port)
        assert (
            subprocess.run(once, capture_output=True, text=True, check=True).stdout.strip()
            == "TimeoutError"
        )
        (cut,) = network.active()
        assert (str(cut.link), cut.tag) == ("kafka-1->kafka-2", "test-cut")
        assert cut.packets > 0
    finally:
        removed = network.restore("test-cut")
    assert [str(cut.link) for cut in removed] == ["kafka-1->kafka-2"]
    assert network.active() == []
    assert clients["kafka-1"].sees("ok", timeout_s=30.0)
    listed = subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=True).stdout
    assert network.chain not in listed  # the chain and its jump are gone


def test_restore_removes_only_its_own_cuts_and_clear_removes_all(
    network: LabNetwork, clients: dict[str, Client]
) -> None:
    network.cut([Link("kafka-1", "kafka-2")], "first")
    network.cut([Link("kafka-3", "kafka-2"), Link("kafka-3", "zookeeper")], "second")
    assert [c.tag for c in network.restore("first")] == ["first"]
    assert {str(c.link) for c in network.active()} == {"kafka-3->kafka-2", "kafka-3->zookeeper"}
    assert clients["kafka-3"].sees("TimeoutError")
    assert clients["kafka-1"].sees("ok", timeout_s=30.0)
    assert len(network.clear()) == 2
    assert network.active() == []
    assert clients["kafka-3"].sees("ok", timeout_s=30.0)


def test_a_cut_is_refused_for_a_node_outside_its_cgroup_or_unknown(network: LabNetwork) -> None:
    with pytest.raises(NetworkFaultError, match="kafka-1 does not run in its cgroup"):
        network.cut([Link("kafka-1", "kafka-2")], "refused")
    with pytest.raises(NetworkFaultError, match="kafka4-1: not an end of a link"):
        network.cut([Link("kafka-1", "kafka4-1")], "refused")
    assert network.active() == []


def test_without_root_a_cut_is_refused_with_a_clear_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(Not root: the lab's Python is root's, which no other user may run here.)"""
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    network = LabNetwork(config(OFFSET, tmp_path))
    with pytest.raises(NetworkFaultError) as refused:
        network.cut([Link("kafka-1", "kafka-2")], "refused")
    assert str(refused.value) == (
        "network partitions need root (iptables and cgroups); run the lab and the scenario as root"
    )
    argv = ["java", "kafka.Kafka"]
    assert network.enter(network.config.service("kafka-1"), argv) == argv
    assert network.active() == []
    assert network.clear() == []


def test_a_slow_link_holds_one_process_packets_and_passes_them_once_its_program_is_gone(
    network: LabNetwork, clients: dict[str, Client]
) -> None:
    delayer = Delayer.start(5000 + OFFSET, 150, 0, "test", 120)
    network.cut([Link("kafka-1", "kafka-2")], "slow", Hold(delayer.queue))
    try:
        assert clients["kafka-1"].sees("slow"), clients["kafka-1"].lines[-5:]
        assert clients["kafka-3"].sees("ok")
        assert clients["other lab's kafka-1"].sees("ok")
        (link,) = network.active()
        assert (link.how, link.tag) == (f"slow (queue {delayer.queue})", "slow")
        assert str(link).endswith("packets held)")
    finally:
        network.restore("slow")
        tally = delayer.stop()
    assert tally is not None
    assert tally.held > 0
    assert tally.mean_ms == tally.max_ms == 150
    assert clients["kafka-1"].sees("ok")
    # a delay program that died: the rule's packets pass unheld (--queue-bypass)
    dead = Delayer.start(5000 + OFFSET, 150, 0, "test", 120)
    dead.process.kill()
    dead.process.wait()
    network.cut([Link("kafka-1", "kafka-2")], "orphaned", Hold(dead.queue))
    assert clients["kafka-1"].sees("ok")
    assert [c.how for c in network.clear()] == [f"slow (queue {dead.queue})"]


NEMESIS = """
import sys, time
from eoslab.runtime.linkdelay import Delayer
print(Delayer.start(int(sys.argv[1]), 150, 0, "test", 120).process.pid, flush=True)
time.sleep(120)
"""


def test_a_delay_program_ends_itself_when_the_nemesis_that_started_it_dies() -> None:
    nemesis = subprocess.Popen(
        [sys.executable, "-c", NEMESIS, str(5000 + OFFSET)], stdout=subprocess.PIPE, text=True
    )
    assert nemesis.stdout is not None
    program = int(nemesis.stdout.readline())
    assert psutil.pid_exists(program)
    nemesis.kill()
    nemesis.wait()
    assert wait_until(lambda: not _alive(program), 10.0, interval_s=0.1)


def _alive(pid: int) -> bool:
    """Whether the process runs (a zombie, exited and not yet reaped by init, does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_lossy_link_drops_some_of_one_process_packets(
    network: LabNetwork, clients: dict[str, Client]
) -> None:
    network.cut([Link("kafka-1", "kafka-2")], "lossy", Loss(0.5))
    try:
        assert wait_until(lambda: network.active()[0].packets > 0, 15.0, interval_s=0.2)
        (link,) = network.active()
        assert link.how == "lossy 0.5"
        assert "lossy 0.5, " in str(link)
        assert clients["kafka-3"].sees("ok")
    finally:
        network.restore("lossy")
    assert clients["kafka-1"].sees("ok", timeout_s=30.0)
