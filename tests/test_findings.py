"""The reproducers of the bugs the lab found in other software (findings/): each still shows its
bug with the versions the project pins. When one stops reproducing, an upgrade fixed it: say so
in findings/README.md and retire the reproducer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FINDINGS = Path(__file__).resolve().parents[1] / "findings"


def reproduce(name: str) -> str:
    """What the reproducer printed (its errors after it, for the assertion's message)."""
    done = subprocess.run(
        [sys.executable, str(FINDINGS / name / "reproduce.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.stdout + done.stderr


def test_kio_still_allocates_an_array_from_a_lying_count() -> None:
    printed = reproduce("kio-array-count-allocation")
    assert "memory allocation of 78310840120 bytes failed" in printed
    assert "died of SIGABRT" in printed


def test_confluent_kafka_still_raises_system_error_from_flush_on_a_fatal_error() -> None:
    printed = reproduce("confluent-kafka-flush-systemerror")
    assert "flush raised SystemError: <built-in function time_ns> returned a result" in printed
