"""The dedup-table handler (seed 2.2): PROCESSED_MESSAGE in the effect's transaction.

The message id goes into ``processed_message`` (its primary key) first; if it is there
already the INSERT fails, the transaction rolls back, and the record is skipped. Otherwise
the effect follows in the same transaction: both land, or neither.
"""

from __future__ import annotations

from eoslab.workload.consumer.sink.database import Sink
from eoslab.workload.consumer.sink.effects import Delivery, apply_effect

INSERT_PROCESSED = (
    "INSERT INTO processed_message (message_id, consumer_session, processed_ms) VALUES (?, ?, ?)"
)


def apply(sink: Sink, delivery: Delivery, mode: str, now_ms: int) -> int | None:
    try:
        with sink.transaction() as tx:
            tx.execute(INSERT_PROCESSED, (delivery.message_id, delivery.consumer_session, now_ms))
            return apply_effect(tx, delivery, mode, now_ms)
    except Exception as error:
        if sink.is_unique_violation(error):
            return None
        raise
