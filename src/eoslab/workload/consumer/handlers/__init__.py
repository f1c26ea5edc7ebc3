"""Handler modes: how a consumer applies a record to the sink and when it commits its offset.

=============  ======================================  ===========================================
mode           effect (one sink transaction a record)  offsets
=============  ======================================  ===========================================
auto-commit    naive: applied every time it is seen    librdkafka commits what poll handed out:
                                                       at-most-once
commit-after   naive                                   committed after the effects: at-least-once
idempotent     upsert keyed by the record: a record    as commit-after
               the order has applied changes nothing;
               so does an older one arriving late
               (its effect lost)
dedup-table    insert into processed_message in the    as commit-after
               effect's transaction; a duplicate key
               rolls it back and skips
=============  ======================================  ===========================================
"""

from __future__ import annotations

from collections.abc import Callable

from eoslab.rundir import HandlerMode
from eoslab.workload.consumer.handlers import dedup_table, idempotent, naive
from eoslab.workload.consumer.sink.database import Sink
from eoslab.workload.consumer.sink.effects import Delivery

Handler = Callable[[Sink, Delivery, str, int], int | None]
"""(sink, delivery, mode, now_ms) -> the effect's apply_order, or None: skipped as a duplicate."""

HANDLERS: dict[HandlerMode, Handler] = {
    "auto-commit": naive.apply,
    "commit-after": naive.apply,
    "idempotent": idempotent.apply,
    "dedup-table": dedup_table.apply,
}

AUTO_COMMIT: frozenset[HandlerMode] = frozenset({"auto-commit"})
"""The modes whose offsets librdkafka commits by itself (enable.auto.commit)."""
