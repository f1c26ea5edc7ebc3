"""Bad values on the command line, as a user types them: one ``error:`` line naming the option,
the value and what it takes, exit 2 (click's code for its own usage errors), no traceback, and
nothing started (no lab is up for these)."""

from __future__ import annotations

import os
import subprocess
import sys

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
