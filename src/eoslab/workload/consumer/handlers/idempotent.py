"""The idempotent handler (seed 2.1): an upsert keyed by the record, like a PUT.

The order remembers the last key_seq it applied; within a producer session (session, key,
key_seq) names a record as (session, partition, seq) does. A record at or below it changes
nothing and is journaled as a duplicate: applied already, or older than what is applied. The
guard cannot tell the two apart, and does not try: an older record that arrives late (after a
later key_seq of its key, e.g. a producer retry written after the batches behind it) is never
applied, and the checker finds its effect missing from the sink (``effect_lost``).
"""

from __future__ import annotations

from eoslab.workload.consumer.sink.database import Sink
from eoslab.workload.consumer.sink.effects import Delivery, apply_effect


def apply(sink: Sink, delivery: Delivery, mode: str, now_ms: int) -> int | None:
    with sink.transaction() as tx:
        return apply_effect(tx, delivery, mode, now_ms, only_newer=True)
