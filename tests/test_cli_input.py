"""Bad values on the command line, as a user types them: one ``error:`` line naming the option,
the value and what it takes, exit 2 (click's code for its own usage errors), no traceback, and
nothing started (no lab is up for these)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

EOSLAB = [sys.executable, "-m", "eoslab.cli"]


def refusal(*args: str, env: dict[str, str] | None = None) -> str:
    """The one line of stderr of a refused command."""
    done = subprocess.run(
        [*EOSLAB, *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    return line


@pytest.mark.parametrize(
    ("args", "option", "value"),
    [
        (("run", "baseline", "--records", "-5"), "--records", "-5"),
        (("lab", "logs", "kafka-1", "-n", "0"), "--lines", "0"),
        (("orchestrate", "matrix", "--records", "0"), "--records", "0"),
    ],
)
def test_a_count_below_one_is_refused(args: tuple[str, ...], option: str, value: str) -> None:
    assert refusal(*args) == f"error: {option} takes a positive count, not {value}"


@pytest.mark.parametrize("args", [("lab", "up"), ("run", "baseline")])
def test_an_unknown_runtime_names_the_choices(args: tuple[str, ...]) -> None:
    line = refusal(*args, "--runtime", "podman")
    assert line == (
        "error: unknown runtime 'podman' (--runtime, or $EOSLAB_RUNTIME); "
        "choose one of: local, compose"
    )


def test_an_unknown_runtime_from_the_environment_names_the_variable() -> None:
    assert "$EOSLAB_RUNTIME" in refusal("lab", "up", env={"EOSLAB_RUNTIME": "podman"})


def test_a_reference_broker_whose_port_is_taken_says_so_in_one_line(tmp_path: Path) -> None:
    """Found in CI: a port in use ended `refbroker serve` with a full traceback."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        serve = [sys.executable, "-m", "eoslab.refbroker", "serve", "--listen"]
        where = [f"127.0.0.1:{port}", "--control", "127.0.0.1:0"]
        data = ["--data-dir", str(tmp_path / "data")]
        done = subprocess.run(
            [*serve, *where, *data], capture_output=True, text=True, timeout=60, check=False
        )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"reference broker: error while attempting to bind on address ('127.0.0.1', {port}): "
        "address already in use"
    ]


@pytest.mark.parametrize(
    ("bootstrap", "why"),
    [
        ("127.0.0.1:{closed}", "unreachable (Connection refused)"),
        ("127.0.0.1:{silent}", "not Kafka or not plaintext: timed out"),
    ],
)
def test_a_bootstrap_the_fronting_proxy_cannot_front_is_one_line(bootstrap: str, why: str) -> None:
    """Nobody listening; a listener that never answers a Kafka request (as an HTTP server)."""
    with socket.socket() as closed, socket.socket() as silent:
        closed.bind(("127.0.0.1", 0))
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        ports = {"closed": closed.getsockname()[1], "silent": silent.getsockname()[1]}
        address = bootstrap.format(**ports)
        done = subprocess.run(
            [*EOSLAB, "chaos", "front", "--bootstrap", address],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"error: bootstrap {address}: {why}"]


def test_a_malformed_bootstrap_is_refused() -> None:
    assert refusal("chaos", "front", "--bootstrap", "nohost") == (
        "error: --bootstrap/--control: expected HOST:PORT, got 'nohost'"
    )
