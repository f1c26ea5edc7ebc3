"""A real single Kafka 3.9 broker (with its ZooKeeper) behind the chaos proxy, per test module.

The proxy is started as the lab runtime starts it (`python -m eoslab.chaos.proxy`). The
broker has two listeners: CLIENT advertises the proxy's port, so every client connection
crosses the proxy; DIRECT is the broker's own, for checking what really reached the log.
"""

import os
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from eoslab.chaos.control_client import ProxyControl

KAFKA_LIB = Path(__file__).resolve().parents[2] / "services" / "kafka" / "lib"
START_TIMEOUT_S = 90.0


@dataclass(frozen=True)
class ProxiedKafka:
    bootstrap: str  # through the proxy
    direct_bootstrap: str  # straight to the broker
    control: ProxyControl
    fault_log: Path
    route: str


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen[bytes], deadline: float) -> None:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"port {port} not open in time")


def wait_for_ready_line(process: subprocess.Popen[bytes], deadline: float) -> str:
    """The proxy's "ready" line; its stdout is a pipe read with a deadline."""
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    while (remaining := deadline - time.monotonic()) > 0:
        if selector.select(remaining):
            line = process.stdout.readline().decode()
            if line.startswith("ready"):
                return line
            if not line:
                break
    raise RuntimeError(f"chaos proxy not ready (exit code {process.poll()})")


def wait_for_broker(bootstrap: str, deadline: float) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    while time.monotonic() < deadline:
        try:
            if admin.list_topics(timeout=2).brokers:
                return
        except Exception:  # the broker is still starting: poll again
            time.sleep(0.3)
    raise TimeoutError(f"broker at {bootstrap} not ready")


def java(main_class: str, heap: str, config: Path, log4j: Path, log: Path) -> subprocess.Popen:
    command = [
        "java",
        f"-Xmx{heap}",
        "-XX:+UseSerialGC",
        f"-Dlog4j.configuration=file:{log4j}",
        "-cp",
        f"{KAFKA_LIB}/*",
        main_class,
        str(config),
    ]
    with log.open("wb") as output:
        return subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)


def start_proxy(routes: list[str], control_port: int, fault_log: Path) -> subprocess.Popen[bytes]:
    """`python -m eoslab.chaos.proxy`, as the lab runtime runs it, once it has said "ready"."""
    command = [sys.executable, "-m", "eoslab.chaos.proxy", "--control", f"127.0.0.1:{control_port}"]
    for route in routes:
        command += ["--route", route]
    command += ["--fault-log", str(fault_log), "--seed", "42"]
    proxy = subprocess.Popen(
        command, stdout=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    try:
        wait_for_ready_line(proxy, time.monotonic() + 30)
    except RuntimeError:
        stop(proxy)
        raise
    return proxy


def write_properties(path: Path, properties: dict[str, object]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
    return path


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def proxied_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedKafka]:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not (KAFKA_LIB / ".fetched").exists():
        assert time.monotonic() < deadline, f"Kafka jars not fetched into {KAFKA_LIB}"
        time.sleep(2)
    work = tmp_path_factory.mktemp("proxied-kafka")
    zk_port, client_port, direct_port, proxy_port, control_port = (free_port() for _ in range(5))
    log4j = write_properties(
        work / "log4j.properties",
        {
            "log4j.rootLogger": "WARN, file",
            "log4j.appender.file": "org.apache.log4j.FileAppender",
            "log4j.appender.file.File": work / "java.log",
            "log4j.appender.file.layout": "org.apache.log4j.PatternLayout",
            "log4j.appender.file.layout.ConversionPattern": "%d %p %c: %m%n",
        },
    )
    zk_config = write_properties(
        work / "zk.properties",
        {"dataDir": work / "zk", "clientPort": zk_port, "admin.enableServer": "false"},
    )
    kafka_config = write_properties(
        work / "server.properties",
        {
            "broker.id": 1,
            "zookeeper.connect": f"127.0.0.1:{zk_port}",
            "listeners": f"CLIENT://127.0.0.1:{client_port},DIRECT://127.0.0.1:{direct_port}",
            "advertised.listeners": (
                f"CLIENT://127.0.0.1:{proxy_port},DIRECT://127.0.0.1:{direct_port}"
            ),
            "listener.security.protocol.map": "CLIENT:PLAINTEXT,DIRECT:PLAINTEXT",
            "inter.broker.listener.name": "DIRECT",
            "log.dirs": work / "kafka-logs",
            "num.partitions": 1,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            "num.network.threads": 2,
            "num.io.threads": 2,
        },
    )
    fault_log = work / "faults.jsonl"
    processes: list[subprocess.Popen] = []
    try:
        proxy = start_proxy(
            [f"kafka-1=127.0.0.1:{proxy_port}=127.0.0.1:{client_port}"], control_port, fault_log
        )
        processes.append(proxy)
        zookeeper = java(
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            "256m",
            zk_config,
            log4j,
            work / "zk.out",
        )
        processes.append(zookeeper)
        wait_for_port(zk_port, zookeeper, deadline)
        kafka = java("kafka.Kafka", "512m", kafka_config, log4j, work / "kafka.out")
        processes.append(kafka)
        wait_for_broker(f"127.0.0.1:{proxy_port}", deadline)
        yield ProxiedKafka(
            bootstrap=f"127.0.0.1:{proxy_port}",
            direct_bootstrap=f"127.0.0.1:{direct_port}",
            control=ProxyControl(f"http://127.0.0.1:{control_port}"),
            fault_log=fault_log,
            route="kafka-1",
        )
    finally:
        for process in reversed(processes):
            stop(process)


@dataclass(frozen=True)
class LoneProxy:
    """A proxy whose routes lead nowhere: enough for its control API and process behaviour."""

    process: subprocess.Popen[bytes]
    control: ProxyControl
    routes: tuple[str, ...]


@pytest.fixture(scope="module")
def lone_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoneProxy]:
    routes = ("kafka-1", "refbroker")
    control_port = free_port()
    proxy = start_proxy(
        [f"{name}=127.0.0.1:0=127.0.0.1:{free_port()}" for name in routes],
        control_port,
        tmp_path_factory.mktemp("lone-proxy") / "faults.jsonl",
    )
    try:
        yield LoneProxy(proxy, ProxyControl(f"http://127.0.0.1:{control_port}"), routes)
    finally:
        stop(proxy)


@pytest.fixture
def kafka(proxied_kafka: ProxiedKafka) -> Iterator[ProxiedKafka]:
    """The proxied broker, with no fault left over from the previous test."""
    proxied_kafka.control.clear()
    yield proxied_kafka
    proxied_kafka.control.clear()
