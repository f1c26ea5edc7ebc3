"""A record's effect on the sink: its order's transition and its row in ``effects``.

Both statements run in the caller's transaction. The order changes in one upsert, so two
consumers applying to one order (a zombie and its successor) serialize on the order's row
on either engine. With ``only_newer`` (the idempotent handler) the upsert changes an order
only for a key_seq beyond the last one it applied: applying a record again changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from eoslab.message import Message
from eoslab.rundir import message_id
from eoslab.workload.consumer.sink.database import Transaction
from eoslab.workload.consumer.sink.orders import STATE_AFTER, Command, State

UPSERT_ORDER = f"""
INSERT INTO orders (producer_session, key, state, version, changes, invalid, last_key_seq,
                    updated_ms)
VALUES (?, ?, ?, 1, ?, ?, ?, ?)
ON CONFLICT (producer_session, key) DO UPDATE SET
    state = excluded.state,
    version = orders.version + 1,
    changes = CASE WHEN excluded.state = '{State.CREATED}' THEN 0 ELSE orders.changes END
              + excluded.changes,
    invalid = orders.invalid
              + CASE WHEN (excluded.state = '{State.CREATED}') = (orders.state = '{State.CANCELLED}')
                THEN 0 ELSE 1 END,
    last_key_seq = excluded.last_key_seq,
    updated_ms = excluded.updated_ms
{{guard}}
RETURNING version
"""
"""A CREATE is valid on no order or a cancelled one, the other commands on an open one."""
ONLY_NEWER = "WHERE orders.last_key_seq < excluded.last_key_seq"

INSERT_EFFECT = """
INSERT INTO effects (message_id, producer_session, producer, producer_partition, seq,
                     kafka_partition, kafka_offset, key, key_seq, command, order_version,
                     handler, consumer, consumer_session, member_id, generation, applied_ms)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING apply_order
"""


@dataclass(frozen=True, slots=True)
class Delivery:
    """A workload record as one consumer got it: where it read it, under which membership."""

    message: Message
    command: Command
    partition: int
    offset: int
    consumer: int
    consumer_session: str
    member_id: str
    generation: int

    @property
    def message_id(self) -> str:
        m = self.message
        return message_id(m.session_id, m.partition, m.seq)


def apply_effect(
    tx: Transaction, delivery: Delivery, handler: str, now_ms: int, *, only_newer: bool = False
) -> int | None:
    """The effect's ``apply_order``, or None when ``only_newer`` found it applied already."""
    m = delivery.message
    rows = tx.execute(
        UPSERT_ORDER.format(guard=ONLY_NEWER if only_newer else ""),
        (
            m.session_id,
            m.key,
            STATE_AFTER[delivery.command].value,
            int(delivery.command is Command.MODIFY),
            int(delivery.command is not Command.CREATE),
            m.key_seq,
            now_ms,
        ),
    )
    if not rows:
        return None
    (order_version,) = rows[0]
    ((apply_order,),) = tx.execute(
        INSERT_EFFECT,
        (
            delivery.message_id,
            m.session_id,
            m.producer,
            m.partition,
            m.seq,
            delivery.partition,
            delivery.offset,
            m.key,
            m.key_seq,
            delivery.command.value,
            order_version,
            handler,
            delivery.consumer,
            delivery.consumer_session,
            delivery.member_id,
            delivery.generation,
            now_ms,
        ),
    )
    return int(apply_order)
