"""The proxy as a process: its command line, its control API over HTTP, the `chaos` CLI."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from eoslab.control.http import ControlError
from eoslab.proxy.command import app
from eoslab.runtime.ports import free_port

if TYPE_CHECKING:
    from conftest import LoneProxy


def test_a_port_in_use_exits_non_zero_naming_the_port() -> None:
    with socket.socket() as occupant:
        occupant.bind(("127.0.0.1", 0))
        occupant.listen()
        busy = occupant.getsockname()[1]

        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "eoslab.proxy",
                "--route",
                f"kafka-1=127.0.0.1:{busy}=127.0.0.1:1",
                "--control",
                "127.0.0.1:0",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    assert result.returncode == 1
    assert f"127.0.0.1:{busy}" in result.stderr
    assert "ready" not in result.stdout


def test_a_connection_to_a_broker_that_is_down_is_reset_as_a_refused_one(
    route_to_a_dead_broker: int,
) -> None:
    """The route's broker does not listen: the client's connection is reset, the nearest an
    accepted connection comes to the refusal the broker's own port gives. A clean close would
    be a first read of nothing, which franz-go takes for the broker refusing its TLS or SASL:
    a fatal error where a dead broker's port gives a retried one."""
    with (  # the reset can meet the client's connect already, or its first read
        pytest.raises(ConnectionResetError),
        socket.create_connection(("127.0.0.1", route_to_a_dead_broker), timeout=10) as client,
    ):
        client.recv(1)


def test_sigterm_stops_the_proxy_cleanly() -> None:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eoslab.proxy",
            "--route",
            f"kafka-1=127.0.0.1:{port}=127.0.0.1:1",
            "--control",
            "127.0.0.1:0",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("ready")
        process.terminate()
        assert process.wait(timeout=10) == 0
    finally:
        process.kill()
        process.wait(timeout=10)
    with socket.socket() as again:
        again.bind(("127.0.0.1", port))  # the listener is gone


def test_faults_are_added_listed_and_removed(lone_proxy: LoneProxy) -> None:
    control = lone_proxy.control
    control.clear()

    first = control.add({"kind": "drop-response", "route": "kafka-1", "api": "Produce", "count": 3})
    second = control.add({"kind": "blackhole", "route": "refbroker", "end_ms": 60_000})

    listed = control.faults()
    assert [fault["id"] for fault in listed] == [first, second]
    assert listed[0]["spec"] == {
        "kind": "drop-response",
        "route": "kafka-1",
        "api": "Produce",
        "count": 3,
        "reset": False,
    }
    assert control.counters()["faults"][first] == {
        "kind": "drop-response",
        "matched": 0,
        "injected": 0,
    }
    control.remove(first)
    assert [fault["id"] for fault in control.faults()] == [second]
    control.clear()
    assert control.faults() == []


def test_invalid_specs_get_400_naming_the_field(lone_proxy: LoneProxy) -> None:
    with pytest.raises(ControlError) as refusal:
        lone_proxy.control.add({"kind": "drop-request", "route": "kafka-7", "probability": 2})

    assert refusal.value.status == 400
    assert "route: unknown route 'kafka-7'" in str(refusal.value)
    assert "probability: Input should be less than or equal to 1" in str(refusal.value)


def raw_http(lone_proxy: LoneProxy, request: bytes) -> bytes:
    host, port = lone_proxy.control.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(request)
        connection.shutdown(socket.SHUT_WR)
        answer = b""
        for _ in range(100):
            chunk = connection.recv(65536)
            if not chunk:
                break
            answer += chunk
    return answer


def test_unknown_fault_ids_and_paths_get_404(lone_proxy: LoneProxy) -> None:
    with pytest.raises(ControlError) as unknown_fault:
        lone_proxy.control.remove("f999")
    unknown_path = raw_http(lone_proxy, b"GET /nothing HTTP/1.1\r\n\r\n")

    assert unknown_fault.value.status == 404
    assert "no fault 'f999'" in str(unknown_fault.value)
    assert unknown_path.startswith(b"HTTP/1.1 404 ")


@pytest.mark.parametrize(
    ("request_bytes", "status", "reason"),
    [
        (b"GARBAGE\r\n\r\n", b"400", b"malformed request line"),
        (b"POST /faults HTTP/1.1\r\nContent-Length: 5\r\n\r\n{oops", b"400", b"not JSON"),
        (b"POST /faults HTTP/1.1\r\nContent-Length: 2\r\n\r\n[]", b"400", b"JSON object"),
        (b"POST /faults HTTP/1.1\r\nContent-Length: 10\r\n\r\n{}", b"400", b"incomplete"),
        (b"PUT /faults HTTP/1.1\r\n\r\n", b"405", b"PUT not allowed"),
    ],
)
def test_malformed_http_is_refused_and_the_api_keeps_serving(
    lone_proxy: LoneProxy, request_bytes: bytes, status: bytes, reason: bytes
) -> None:
    answer = raw_http(lone_proxy, request_bytes)

    assert answer.split(b" ")[1] == status
    assert reason in answer
    assert isinstance(lone_proxy.control.faults(), list)


def test_the_chaos_cli_drives_a_running_proxy(lone_proxy: LoneProxy) -> None:
    runner = CliRunner()
    url = ["--control", lone_proxy.control.url]
    lone_proxy.control.clear()

    added = runner.invoke(app, ["fault", "add", '{"kind": "delay", "ms": 5}', *url])
    listed = runner.invoke(app, ["fault", "list", *url])
    counters = runner.invoke(app, ["counters", *url])
    refused = runner.invoke(app, ["fault", "add", '{"kind": "delay"}', *url])
    cleared = runner.invoke(app, ["fault", "clear", added.output.strip(), *url])

    assert added.exit_code == 0
    assert [fault["id"] for fault in json.loads(listed.output)] == [added.output.strip()]
    assert set(json.loads(counters.output)["routes"]) == set(lone_proxy.routes)
    assert refused.exit_code == 1
    assert "ms: Field required" in refused.output
    assert cleared.exit_code == 0
    assert lone_proxy.control.faults() == []
