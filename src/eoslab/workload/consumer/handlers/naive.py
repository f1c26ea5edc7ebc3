"""The naive handler (auto-commit, commit-after): apply the command, whatever came before.

A record delivered twice is applied twice: a second ``effects`` row, the order's version
counted twice, often an invalid transition (a second ORDER_CREATE on an open order).
"""

from __future__ import annotations

from eoslab.workload.consumer.sink.database import Sink
from eoslab.workload.consumer.sink.effects import Delivery, apply_effect


def apply(sink: Sink, delivery: Delivery, mode: str, now_ms: int) -> int | None:
    with sink.transaction() as tx:
        return apply_effect(tx, delivery, mode, now_ms)
