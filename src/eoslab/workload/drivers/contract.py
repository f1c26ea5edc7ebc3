"""The driver line protocol: how a session process (the host) runs a client that lives in a
driver program of its own (Kafka's Java client, franz-go). Every driver speaks exactly this;
``services/clients/<client>/`` hold the programs.

The driver is started by the session process as its child, in its process group, with the
command of its :class:`~eoslab.workload.drivers.ClientLaunch`; it reads **commands** on stdin
and writes **replies** and **events** on stdout, one JSON object a line (UTF-8); its stderr is
the session's log. It holds no application logic: it makes the client calls the host asks for
and reports what the client says. stdin closing means the host is gone: the driver exits at once
without flushing or closing anything, as a crash would (a kill -9 of the session reaches it
anyway, through the process group; so does a SIGSTOP).

Bytes (record keys and values) cross as latin-1 strings (one character per byte), except on
the produce path, where they cross as they are: ``produce`` carries its records in a binary
payload after its line, and acknowledgements come back several a line (``acks``). Measured on
1 KiB values: encoding a record 0.2 µs against 5.9 µs as a JSON line, reading an
acknowledgement 0.35 µs against 2.4 µs (the host's cost per record was 4.5 times
librdkafka's).

Commands (``op``; those with an ``id`` are answered by a reply with ``re`` = that id)::

    {"op": "hello", "id"}                       -> {"client": "java", "version": "3.9.2"}
    {"op": "producer", "id", "handle", "config": {native properties}, "stats_ms": N,
           "consumer": handle (optional)}       the group consumer whose offsets this
                                                   (transactional) producer sends: a client
                                                   that commits them only from one client of
                                                   both roles (franz-go) makes them one
    {"op": "produce", "handle", "topic", "bytes": L}   followed on stdin by L bytes: records,
                                                   each a RECORD header (token, partition, key
                                                   length, value length; big-endian; -1: null)
                                                   then the key's and the value's bytes. No
                                                   reply: every token gets an "acks" entry or a
                                                   "delivery" event, always
    {"op": "purge", "id", "handle"}             abandon every outstanding record (each gets its
                                                   delivery event, with an error); the producer
                                                   takes no more
    {"op": "init_transactions" | "begin_transaction" | "commit_transaction" |
           "abort_transaction", "id", "handle", "timeout_ms"}
    {"op": "send_offsets_to_transaction", "id", "handle", "timeout_ms",
           "offsets": [[topic, partition, offset], ...], "group_metadata": snapshot id}
    {"op": "close_producer", "id", "handle", "timeout_ms"}
    {"op": "produce_burst", "id", "handle", "topic", "partition", "count", "value_bytes"}
                                                -> {"seconds", "failed"}: count values sent by
                                                   the driver itself as fast as its client takes
                                                   them, every acknowledgement waited for (the
                                                   client's own rate: `make bench`)
    {"op": "consumer", "id", "handle", "config": {native properties}, "eof": bool}
    {"op": "subscribe", "id", "handle", "topics": [...]}
    {"op": "assign", "id", "handle", "partitions": [[topic, partition, offset], ...]}
    {"op": "consume", "id", "handle", "max": N, "timeout_ms"}
                                                -> [{"t", "p", "o", "k", "v", "ts", "hw"} |
                                                   {"t", "p", "o", "eof": true}, ...] (at most
                                                   N records; "hw": the partition's end as the
                                                   client last learned it from a fetch, the
                                                   high watermark, the last stable offset under
                                                   read_committed; absent if it cannot tell)
    {"op": "commit", "id", "handle", "offsets": [[topic, partition, offset], ...]}
                                                -> [[topic, partition, offset, error | null]]
    {"op": "committed", "id", "handle", "partitions": [[topic, partition]], "timeout_ms"}
                                                -> [[topic, partition, offset (-1001: none)]]
    {"op": "seek", "id", "handle", "position": [topic, partition, offset (-2: beginning)]}
    {"op": "pause" | "resume_partitions", "id", "handle", "partitions": [[topic, partition]]}
    {"op": "watermarks", "id", "handle", "position": [topic, partition], "timeout_ms"}
                                                -> [low, high] (high as the isolation level
                                                   sees it: the last stable offset under
                                                   read_committed), asked of the cluster; the
                                                   host answers a cached ask (librdkafka's
                                                   cached=True) from the last "hw" itself
    {"op": "group_metadata", "id", "handle"}    -> {"id": snapshot id, "generation", "member_id"}
    {"op": "close_consumer", "id", "handle", "timeout_ms"}
    {"op": "resume"}                            ends a rebalance callback (below)
    {"op": "exit"}

Replies: ``{"re": id, "ok": result}`` or ``{"re": id, "error": ERROR}``.

Events (``ev``), at any time::

    {"ev": "acks", "acks": [token, partition, offset, token, partition, offset, ...]}
                                                records acknowledged (offset null: without one),
                                                   in the order the client reported them
    {"ev": "delivery", "token", "partition", "offset": null, "error": ERROR}
                                                a record that failed
    {"ev": "error", "handle", "error": ERROR}   the client went fatal (librdkafka's error_cb)
    {"ev": "stats", "handle", "stats": {"producer_id", "producer_epoch", and the client's own
     counters}}                                 every stats_ms
    {"ev": "commit", "handle", "offsets": [[topic, partition, offset]]}
                                                the client's own (auto-)commit succeeded
    {"ev": "rebalance", "handle", "kind": "assign" | "revoke" | "lost",
     "partitions": [[topic, partition]]}        while a consume waits: the driver then serves
                                                   commands until {"op": "resume"}, and the
                                                   consume goes on (the host runs its callback
                                                   there, as librdkafka runs callbacks inside
                                                   its poll)

ERROR is ``{"code", "reason", "exception", "fatal", "retriable", "abortable"}``: ``code`` is
Kafka's error code, or librdkafka's (negative) number for a condition of the client's own —
so every client's errors have librdkafka's names on the host (``KafkaError(code).name()``).
Each driver's README-level docstring lists how its client's exceptions map.
"""

from __future__ import annotations

import struct
from typing import Any

OFFSET_INVALID = -1001
OFFSET_BEGINNING = -2
OFFSET_END = -1

Line = dict[str, Any]
RECORD = struct.Struct(">qiii")
"""A produced record's header in a ``produce`` payload: token, partition, key length, value
length (-1: null), big-endian; the key's bytes and the value's follow it."""


def record(token: int, partition: int, key: bytes | None, value: bytes | None) -> bytes:
    """One record of a ``produce`` payload."""
    return (
        RECORD.pack(
            token, partition, -1 if key is None else len(key), -1 if value is None else len(value)
        )
        + (key or b"")
        + (value or b"")
    )


def raw(text: str | None) -> bytes | None:
    """The bytes a latin-1 string of the protocol carries."""
    return None if text is None else text.encode("latin-1")
