"""A real single Kafka 3.9 broker (with its ZooKeeper) behind the chaos proxy, per test module.

It is a one-broker lab of the runtime's: CLIENT advertises the proxy's port, so every client
connection crosses the proxy; DIRECT is the broker's own, for checking what really reached the
log. `lone_proxy` is the proxy process alone, for its command line and control API.
"""

import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from eoslab.proxy.control_client import ProxyControl
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.ports import free_port
from eoslab.runtime.topology import LabConfig

# The chaos tests' own one-broker lab, beside the session lab (EOSLAB_TEST_PORT_OFFSET).
CHAOS_PORT_OFFSET = int(os.environ.get("EOSLAB_TEST_PORT_OFFSET", "1000")) + 3500


@dataclass(frozen=True)
class ProxiedKafka:
    bootstrap: str  # through the proxy
    direct_bootstrap: str  # straight to the broker
    control: ProxyControl
    fault_log: Path
    route: str


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


def start_proxy(routes: list[str], control_port: int, fault_log: Path) -> subprocess.Popen[bytes]:
    """`python -m eoslab.proxy`, as the lab runtime runs it, once it has said "ready"."""
    command = [sys.executable, "-m", "eoslab.proxy", "--control", f"127.0.0.1:{control_port}"]
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


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def proxied_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedKafka]:
    """A one-broker lab from the runtime: the proxy in front, a DIRECT listener beside it."""
    config = LabConfig(
        state_dir=tmp_path_factory.mktemp("proxied-kafka"),
        port_offset=CHAOS_PORT_OFFSET,
        targets=("kafka",),
        brokers=1,
        with_postgres=False,
        with_spark_connect=False,
        direct_listener=True,
        with_airflow=False,
    )
    lab = LocalRuntime(config)
    lab.up()
    try:
        yield ProxiedKafka(
            bootstrap=config.bootstrap_servers,
            direct_bootstrap=config.direct_bootstrap_servers,
            control=ProxyControl(config.proxy_control_url),
            fault_log=lab.fault_log_path(),
            route="kafka-1",
        )
    finally:
        lab.down()


@pytest.fixture
def route_to_a_dead_broker(tmp_path: Path) -> Iterator[int]:
    """A proxy whose one route leads to a port nothing listens on: the route's port."""
    listen, dead, control = free_port(), free_port(), free_port()
    proxy = start_proxy(
        [f"kafka-1=127.0.0.1:{listen}=127.0.0.1:{dead}"], control, tmp_path / "faults.jsonl"
    )
    try:
        yield listen
    finally:
        stop(proxy)


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
