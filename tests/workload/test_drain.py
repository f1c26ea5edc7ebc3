"""A session's flush as a loop of polls: it goes on reporting while it waits (pure logic on a
producer whose reports arrive one poll at a time)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eoslab.workload.producer.session import drain


class Outstanding:
    """A producer with ``left`` records outstanding, one reported per poll."""

    def __init__(self, left: int) -> None:
        self.left = left

    def __len__(self) -> int:
        return self.left

    def poll(self, timeout: float = -1) -> int:
        self.left -= 1
        return 1


def guarded(call: Callable[[], Any]) -> Any:
    return call()


def test_a_drain_calls_between_after_every_poll_until_nothing_is_left() -> None:
    producer = Outstanding(3)
    seen: list[int] = []
    assert drain(producer, 5.0, guarded, lambda: seen.append(len(producer))) == 0  # type: ignore[arg-type]
    assert seen == [2, 1, 0]  # the session's progress lines go on while its acks come in


def test_a_drain_that_times_out_says_how_many_are_left() -> None:
    class Stuck(Outstanding):
        def poll(self, timeout: float = -1) -> int:
            return 0

    calls: list[None] = []
    assert drain(Stuck(4), 0.1, guarded, lambda: calls.append(None)) == 4  # type: ignore[arg-type]
    assert calls  # and it reported while it waited
