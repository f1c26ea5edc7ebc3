"""The order state machine of seed ``004_*``: which command a record carries, what it does.

An order is one producer session's key. Its records, in key_seq order, are a series of order
lifecycles: ``ORDER_CREATE``, ``ORDER_MODIFY`` m times, ``ORDER_CANCEL``, then the next
lifecycle opens with ``ORDER_CREATE`` again. m (1..4) is seeded per key,
``1 + crc32("<seed>:<key>") % 4``, which Spark computes with its own ``crc32``, so the checker
can derive the command of any record from the topic alone (:data:`COMMAND_SQL`).

A transition is valid when ``ORDER_CREATE`` finds no open order (none yet, or cancelled) and
the others find one open; a doubled or reordered effect breaks that, or the order's version.
"""

from __future__ import annotations

import zlib
from enum import StrEnum

MAX_MODIFICATIONS = 4


class Command(StrEnum):
    CREATE = "ORDER_CREATE"
    MODIFY = "ORDER_MODIFY"
    CANCEL = "ORDER_CANCEL"


class State(StrEnum):
    CREATED = "CREATED"
    MODIFIED = "MODIFIED"
    CANCELLED = "CANCELLED"


STATE_AFTER: dict[Command, State] = {
    Command.CREATE: State.CREATED,
    Command.MODIFY: State.MODIFIED,
    Command.CANCEL: State.CANCELLED,
}


LIFECYCLE_SQL = f"(3 + pmod(crc32(concat({{seed}}, ':', {{key}})), {MAX_MODIFICATIONS}))"
COMMAND_SQL = (
    f"CASE pmod({{key_seq}}, {LIFECYCLE_SQL}) WHEN 0 THEN '{Command.CREATE}' "
    f"WHEN {LIFECYCLE_SQL} - 1 THEN '{Command.CANCEL}' ELSE '{Command.MODIFY}' END"
)
"""Spark SQL for :func:`command_of`; ``.format(seed=..., key=..., key_seq=...)`` with column
expressions."""


def lifecycle(seed: int, key: str) -> int:
    """Records per order lifecycle of ``key``: create, 1..MAX_MODIFICATIONS modifies, cancel."""
    return 3 + zlib.crc32(f"{seed}:{key}".encode()) % MAX_MODIFICATIONS


def command_of(seed: int, key: str, key_seq: int) -> Command:
    position = key_seq % lifecycle(seed, key)
    if position == 0:
        return Command.CREATE
    if position == lifecycle(seed, key) - 1:
        return Command.CANCEL
    return Command.MODIFY
