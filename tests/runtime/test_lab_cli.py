"""`eoslab lab up | status | down` as a user types them, on a lab of the test's own."""

from __future__ import annotations

import ipaddress
import json
import socket
import subprocess
import sys
from pathlib import Path

import psutil

from eoslab.runtime.health import port_free
from eoslab.runtime.processes import MARKER

EOSLAB = [sys.executable, "-m", "eoslab.cli"]


def run(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*EOSLAB, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _loopback(address: str) -> bool:
    """127.0.0.1, also as the JVM shows it on a dual-stack socket (::ffff:127.0.0.1)."""
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip) == ipaddress.ip_address("127.0.0.1")


def ours(lab_dir: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        try:
            if (
                process.environ().get(MARKER) == lab_dir
                and process.status() != psutil.STATUS_ZOMBIE
            ):
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def test_up_status_down_leaves_nothing_behind(lab_env: dict[str, str]) -> None:
    """Down right after up: the warm Spark's warm-up, still running, is stopped too."""
    offset = int(lab_env["EOSLAB_PORT_OFFSET"])
    lab_dir = Path(lab_env["EOSLAB_LAB_DIR"])
    up = run(lab_env, "lab", "up")
    try:
        assert up.returncode == 0, up.stderr + up.stdout
        assert f"127.0.0.1:{9091 + offset}" in up.stdout
        assert "warming up in the background" in up.stdout
        assert f"advertised={9091 + offset}" in up.stdout
        assert f"internal={19091 + offset}" not in up.stdout  # `lab status` lists every port
        assert "every port and topic: `eoslab lab status`" in up.stdout
        assert len(up.stdout.splitlines()) <= 30, up.stdout

        status = run(lab_env, "lab", "status", "--json")
        assert status.returncode == 0, status.stderr
        report = json.loads(status.stdout)
        assert report["up"] is True
        brokers = [s for s in report["services"] if s["kind"] == "kafka"]
        assert [b["name"] for b in brokers] == ["kafka-1", "kafka-2", "kafka-3"]
        assert all(b["healthy"] and b["pid"] for b in brokers)
        assert report["kafka"]["brokers"] == [1, 2, 3]
        assert report["kafka"]["controller"] in {1, 2, 3}
        assert report["refbroker"]["reachable"] is True
        (postgres,) = [s for s in report["services"] if s["kind"] == "postgres"]
        assert postgres["healthy"]
        (spark,) = [s for s in report["services"] if s["kind"] == "spark-connect"]
        assert spark["healthy"]
        assert spark["ports"] == {"grpc": 15002 + offset}

        # Every socket of the lab listens on loopback only.
        pids = {p.pid for p in ours(lab_env["EOSLAB_LAB_DIR"])}
        listening = [
            c
            for c in psutil.net_connections("inet")
            if c.pid in pids and c.status == psutil.CONN_LISTEN
        ]
        assert listening
        assert all(_loopback(c.laddr.ip) for c in listening), listening
    finally:
        down = run(lab_env, "lab", "down")
    assert down.returncode == 0, down.stderr
    assert ours(lab_env["EOSLAB_LAB_DIR"]) == []
    # the warm-up was one of the lab's processes (none is left: above)
    assert "starting spark-warmup" in (lab_dir / "logs" / "spark-warmup.log").read_text()
    assert all(
        port_free(port + offset)
        for port in (2181, 9091, 9092, 9093, 29091, 19091, 9192, 8474, 5433, 15002)
    )


def test_up_brings_up_only_the_targets_asked_for(lab_env: dict[str, str]) -> None:
    """`lab up --targets`; the later commands see the lab as it was brought up."""
    env = {**lab_env, "EOSLAB_WITH_POSTGRES": "0", "EOSLAB_WITH_SPARK_CONNECT": "0"}
    env.pop("EOSLAB_TARGETS", None)
    refused = run(env, "lab", "up", "--targets", "kafka,mongodb", timeout=60)
    assert refused.returncode == 1
    assert "unknown target 'mongodb'; choose one of: kafka, kafka4, refbroker" in refused.stderr
    assert "Traceback" not in refused.stderr
    up = run(env, "lab", "up", "--targets", "refbroker")
    try:
        assert up.returncode == 0, up.stderr + up.stdout
        status = run(env, "lab", "status", "--json")
        assert status.returncode == 0, status.stderr
        report = json.loads(status.stdout)
        assert report["up"] is True
        assert [s["name"] for s in report["services"]] == ["zookeeper", "refbroker", "proxy"]
        assert report["refbroker"]["reachable"] is True
        assert "kafka" not in report
        assert "kafka4" not in report
    finally:
        down = run(env, "lab", "down")
    assert down.returncode == 0, down.stderr
    assert ours(env["EOSLAB_LAB_DIR"]) == []


def test_port_in_use_is_named(lab_env: dict[str, str]) -> None:
    port = 2181 + int(lab_env["EOSLAB_PORT_OFFSET"])
    with socket.socket() as squatter:
        squatter.setsockopt(
            socket.SOL_SOCKET, socket.SO_REUSEADDR, 1
        )  # the port may be in TIME_WAIT
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        result = run(lab_env, "lab", "up", timeout=60)
    assert result.returncode == 1
    assert f"zookeeper:{port}" in result.stderr
    assert "EOSLAB_PORT_OFFSET" in result.stderr
    assert ours(lab_env["EOSLAB_LAB_DIR"]) == []


def test_stale_state_names_the_fix(lab_env: dict[str, str]) -> None:
    lab_dir = Path(lab_env["EOSLAB_LAB_DIR"])
    lab_dir.mkdir(parents=True)
    dead = {"name": "zookeeper", "pid": 999999, "create_time": 0.0, "argv": ["java"], "log": "x"}
    (lab_dir / "state.json").write_text(json.dumps({"services": {"zookeeper": dead}}))
    result = run(lab_env, "lab", "up", timeout=60)
    assert result.returncode == 1
    assert "stale state" in result.stderr
    assert "eoslab lab down" in result.stderr
    assert run(lab_env, "lab", "down").returncode == 0
    assert not (lab_dir / "state.json").exists()


def test_missing_jars_name_make_setup(lab_env: dict[str, str], tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / "services" / "kafka").mkdir(parents=True)
    (checkout / "services" / "kafka" / "pom.xml").write_text("<project/>")
    result = run({**lab_env, "EOSLAB_HOME": str(checkout)}, "lab", "up", timeout=60)
    assert result.returncode == 1
    assert "make setup" in result.stderr


def test_unknown_service_lists_the_known_ones(lab_env: dict[str, str]) -> None:
    result = run(lab_env, "lab", "kill", "kafka-9", timeout=60)
    assert result.returncode == 1
    assert "kafka-9" in result.stderr
    assert "kafka-1" in result.stderr
