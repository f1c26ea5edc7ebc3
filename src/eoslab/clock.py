"""Time as the lab reads it: wall-clock milliseconds for every file it writes, and one way to
wait for a condition with a bound."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch: the timestamp unit of every run and log file."""
    return time.time_ns() // 1_000_000


def wait_until(
    condition: Callable[[], T | None], timeout_s: float, interval_s: float = 0.25
) -> T | None:
    """Poll ``condition`` until it returns something truthy (returned) or ``timeout_s`` passes
    (None, or the last falsy answer). It is asked at least once, and once more at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = condition()
        if answer:
            return answer
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return answer
        time.sleep(min(interval_s, remaining))
