"""The reproducers of the bugs the lab found in other software (findings/): each still shows its
bug with the versions the project pins. When one stops reproducing, an upgrade fixed it: say so
in findings/README.md and retire the reproducer."""

from __future__ import annotations

import re
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


def test_franz_go_still_waits_for_a_metadata_refresh_after_concurrent_transactions() -> None:
    printed = reproduce("franz-go-concurrent-transactions-stall")
    acked = {
        label: int(ms)
        for label, ms in re.findall(
            r"^(.+?), CONCURRENT_TRANSACTIONS once: acknowledged after (\d+) ms", printed, re.M
        )
    }
    default, short = (
        "franz-go v1.22.2, MetadataMinAge 5s (its default)",
        "franz-go v1.22.2, MetadataMinAge 100ms",
    )
    assert acked.get(default, 0) >= 4000, printed  # the 5 s to the next refresh it allows
    assert acked.get(short, 10_000) < acked[default] - 3000, printed  # the refresh it waited for
    assert printed.count("retried after a metadata refresh") == 2, printed
