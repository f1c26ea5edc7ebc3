"""Timers for the coordinators: Kafka's delayed operations and periodic tasks become callbacks on
the broker's asyncio loop (tests inject a manual scheduler)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Timer: ...


class LoopScheduler:
    """Timers on the running asyncio loop (the broker's)."""

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_later(delay_s, callback)
