"""What the lab reads from ZooKeeper: which brokers are registered."""

from __future__ import annotations

import logging

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

logging.getLogger("kazoo").setLevel(logging.CRITICAL)


def registered_brokers(connect: str, timeout_s: float = 3.0) -> set[int]:
    """Broker ids under /brokers/ids (ephemeral: a broker's id leaves with its session)."""
    client = KazooClient(hosts=connect, timeout=timeout_s, connection_retry={"max_tries": 0})
    try:
        client.start(timeout=timeout_s)
        if not client.exists("/brokers/ids"):
            return set()
        return {int(child) for child in client.get_children("/brokers/ids")}
    except (KazooException, KazooTimeoutError, OSError):
        return set()
    finally:
        client.stop()
        client.close()
