"""librdkafka statistics samples, cut down to what a run needs to explain itself.

The full sample (statistics.interval.ms) is tens of kilobytes; a run keeps the counters
that show retries, in-flight requests and the idempotent producer's state machine.
"""

from __future__ import annotations

import json
from typing import Any

BROKER_FIELDS = (
    "state",
    "outbuf_msg_cnt",
    "waitresp_cnt",
    "waitresp_msg_cnt",
    "txretries",
    "req_timeouts",
    "connects",
    "disconnects",
)
EOS_FIELDS = ("idemp_state", "epoch_cnt", "producer_id", "producer_epoch")


def stats_sample(raw: str, producer: int, session_id: str, ts_ms: int) -> dict[str, Any]:
    """One stats.jsonl line from librdkafka's statistics JSON."""
    stats = json.loads(raw)
    brokers = {
        name: {field: broker.get(field) for field in BROKER_FIELDS}
        for name, broker in stats.get("brokers", {}).items()
        if broker.get("nodeid", -1) >= 0
    }
    eos = stats.get("eos", {})
    return {
        "producer": producer,
        "session_id": session_id,
        "ts_ms": ts_ms,
        "txmsgs": stats.get("txmsgs"),
        "msg_cnt": stats.get("msg_cnt"),
        "txretries": sum(b["txretries"] or 0 for b in brokers.values()),
        "retries": retransmitted(stats),
        "eos": {field: eos.get(field) for field in EOS_FIELDS},
        "brokers": brokers,
    }


def retransmitted(stats: dict[str, Any]) -> int:
    """Messages transmitted more than once (retries after a lost ack or a reset connection).

    librdkafka's per-broker txretries counts request retries only, not messages re-queued
    after a disconnect. Per partition, txmsgs counts every transmission and msgs every
    message produced, so txmsgs - msgs is a lower bound of the retransmissions, exact once
    the queues are drained (the last sample of a session, taken after its flush).
    """
    return sum(
        max(0, partition["txmsgs"] - partition["msgs"])
        for topic in stats.get("topics", {}).values()
        for number, partition in topic.get("partitions", {}).items()
        if int(number) >= 0
    )
