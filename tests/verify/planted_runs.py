"""Build run directories by hand: a topic written in a chosen order, and a history to match.

A plain (non-idempotent, one request in flight) producer writes crafted v1 messages in exactly
the order given, so duplicates, reorders, gaps and phantoms land at known offsets; the history
Parquet says what the "workload" believed. Together they are a run directory as the run
executor would leave it.
"""

from __future__ import annotations

import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from eoslab.message import Message, encode_key, encode_value
from eoslab.rundir import HISTORY_SCHEMA, Outcome, RunDir, RunInfo, SessionInfo
from eoslab.verify.submit import checker_job

SEND_MS = 1_700_000_000_000


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=3)], operation_timeout=30
    ).values():
        future.result(timeout=60)


def write_in_order(
    bootstrap: str, topic: str, sends: list[tuple[int, bytes | None, bytes]]
) -> list[int]:
    """Produce (partition, key, value) one after the other; the offset of each, in order."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": False,
            "acks": "all",
            "max.in.flight.requests.per.connection": 1,
            "linger.ms": 0,
            "message.timeout.ms": 60_000,
        }
    )
    offsets: list[int | None] = [None] * len(sends)
    failures: list[str] = []

    def report(index: int):
        def on_delivery(error: object, message: object) -> None:
            if error is not None:
                failures.append(str(error))
            else:
                offsets[index] = message.offset()  # type: ignore[attr-defined]

        return on_delivery

    for index, (partition, key, value) in enumerate(sends):
        producer.produce(
            topic, key=key, value=value, partition=partition, on_delivery=report(index)
        )
        producer.flush(60)  # one at a time: the log order is the order given
    if failures or any(offset is None for offset in offsets):
        raise KafkaException(f"planting failed: {failures}")
    return [offset for offset in offsets if offset is not None]


@dataclass
class PlantedRun:
    """A run directory under construction: log writes and history rows, in the order given."""

    root: Path
    bootstrap: str
    partitions: int = 3
    run_id: str = field(default_factory=lambda: f"planted-{uuid.uuid4().hex[:8]}")
    sends: list[tuple[int, bytes | None, bytes]] = field(default_factory=list)
    rows: list[dict[str, object]] = field(default_factory=list)
    sessions: dict[str, int] = field(default_factory=dict)

    @property
    def topic(self) -> str:
        return f"eos-{self.run_id}"

    def session(self, producer: int = 0) -> str:
        session_id = uuid.uuid4().hex
        self.sessions[session_id] = producer
        return session_id

    def message(self, session_id: str, partition: int, seq: int, key: str, key_seq: int) -> Message:
        return Message(
            run_id=self.run_id,
            session_id=session_id,
            producer=self.sessions.get(session_id, 9),
            partition=partition,
            seq=seq,
            key=key,
            key_seq=key_seq,
        )

    def log(self, message: Message) -> None:
        """Write the message into the log (once per call)."""
        self.sends.append((message.partition, encode_key(message), encode_value(message)))

    def log_raw(self, partition: int, value: bytes) -> None:
        self.sends.append((partition, None, value))

    def history(
        self,
        message: Message,
        outcome: Outcome,
        offset: int | None = None,
        error: str | None = None,
    ) -> None:
        """A history row; acknowledgements take 1, 2, 3, ... ms, in the order recorded."""
        acked = outcome is Outcome.ACK
        latency_ms = float(1 + sum(row["outcome"] == Outcome.ACK for row in self.rows))
        send_ms = SEND_MS + len(self.rows)
        self.rows.append(
            {
                "run_id": message.run_id,
                "session_id": message.session_id,
                "producer": message.producer,
                "partition": message.partition,
                "seq": message.seq,
                "key": message.key,
                "key_seq": message.key_seq,
                "send_ms": send_ms,
                "outcome": outcome.value,
                "offset": offset if acked else None,
                "error": error,
                "ack_ms": int(send_ms + latency_ms) if acked else None,
                "latency_ms": latency_ms if acked else None,
            }
        )

    def sent_and_acked(self, message: Message, offset: int) -> None:
        """The common case: in the log once, acknowledged at that offset."""
        self.log(message)
        self.history(message, Outcome.ACK, offset=offset)

    def write(self, expected: dict[str, object] | None = None) -> tuple[RunDir, list[int]]:
        """Create the topic, write the log in order, write run.json and the history."""
        create_topic(self.bootstrap, self.topic, self.partitions)
        offsets = write_in_order(self.bootstrap, self.topic, self.sends)
        run = RunDir(self.root / self.run_id).create()
        run.write_info(
            RunInfo(
                run_id=self.run_id,
                scenario="planted",
                target="kafka",
                bootstrap=self.bootstrap,
                topic=self.topic,
                partitions=self.partitions,
                seed=0,
                started_ms=SEND_MS,
                ended_ms=SEND_MS + 60_000,
                expected=expected or {},
                sessions=[
                    SessionInfo(session_id=s, producer=p, started_ms=SEND_MS)
                    for s, p in self.sessions.items()
                ],
            )
        )
        if self.rows:
            pq.write_table(
                pa.Table.from_pylist(self.rows, schema=HISTORY_SCHEMA),
                run.history_file(0, "planted", 0),
            )
        return run, offsets


def plant_clean(root: Path, bootstrap: str, records_per_partition: int = 30) -> PlantedRun:
    """A healthy run: two sessions of producer 0 (a restart) and one of producer 1, three keys
    per partition, every record once and in order; one definite failure inside a stream (no
    gap), an unsent tail and a timed-out last record that never arrived (no anomaly either)."""
    run = PlantedRun(root=root, bootstrap=bootstrap)
    key_seqs: dict[tuple[str, str], int] = {}
    next_offset = [0] * run.partitions

    def send(session_id: str, partition: int, seq: int, outcome: Outcome = Outcome.ACK) -> None:
        key = f"k{partition}{seq % 3}"
        key_seq = key_seqs.get((session_id, key), 0)
        key_seqs[(session_id, key)] = key_seq + 1
        message = run.message(session_id, partition, seq, key, key_seq)
        if outcome is Outcome.ACK:
            run.sent_and_acked(message, next_offset[partition])
            next_offset[partition] += 1
        else:
            run.history(message, outcome, error=None if outcome is Outcome.UNSENT else "_STATE")

    first, restarted, other = run.session(0), run.session(0), run.session(1)
    for partition in range(run.partitions):
        for seq in range(records_per_partition):
            send(first, partition, seq)
    send(first, 1, records_per_partition, Outcome.FAIL)
    send(first, 1, records_per_partition + 1)
    send(first, 2, records_per_partition, Outcome.UNSENT)
    send(first, 2, records_per_partition + 1, Outcome.UNSENT)
    send(first, 0, records_per_partition, Outcome.INDETERMINATE)
    for seq in range(10):
        send(restarted, 0, seq)
        send(other, seq % run.partitions, seq // run.partitions)
    return run


def rows(run: RunDir, anomaly: str) -> list[dict[str, object]]:
    """An anomaly table the checker wrote, in log order."""
    table = pq.read_table(run.anomaly_dir(anomaly)).to_pylist()
    return sorted(table, key=lambda row: (row["partition"], row["offset"]))


def located(run: RunDir, anomaly: str, *columns: str) -> list[tuple[object, ...]]:
    """Those columns of an anomaly table's rows, in log order."""
    return [tuple(row[c] for c in columns) for row in rows(run, anomaly)]


def spark_submit(run: RunDir) -> subprocess.CompletedProcess[str]:
    """The checker's spark-submit job on a run directory, as the DAGs run it (bounded)."""
    spark_job = checker_job(run.path)
    return subprocess.run(
        spark_job.command(),
        env=spark_job.environment(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


PLANTED_EXPECTED = {
    "lost": ">0",
    "duplicate": ">0",
    "reorder": ">0",
    "gap": ">0",
    "phantom": ">0",
    "indeterminate": ">0",
    "key_duplicate": ">0",
    "key_reorder": ">0",
    "key_gap": ">0",
    "foreign": ">0",
    "misplaced": ">0",
    "corrupt": ">0",
    "errors": {"_MSG_TIMED_OUT": ">0", "MSG_SIZE_TOO_LARGE": ">0"},
}


def corrupted(value: bytes, before: bytes, after: bytes) -> bytes:
    """``value`` with its first ``before`` changed to ``after`` (the checksum left as it was)."""
    assert before in value
    return value.replace(before, after, 1)


def plant_anomalies(root: Path, bootstrap: str) -> tuple[PlantedRun, dict[str, str]]:
    """Three partitions, one producer session (A) and a stranger (B); see the comments for what
    sits where. Returns the run and A's session id under "A", B's under "B"."""
    run = PlantedRun(root=root, bootstrap=bootstrap)
    a, b = run.session(producer=0), run.session(producer=1)
    del run.sessions[b]  # B never appears in run.json nor the history: its records are phantoms

    # partition 0: k0 sequences 0-4 with seq 2 written twice (offsets 2 and 3); seq 4 is in the
    # log although the client timed it out; then key k9 with key_seq 1 before 0.
    p0 = [run.message(a, 0, seq, "k0", seq) for seq in range(5)]
    for message, offset in zip(p0[:4], (0, 1, 2, 4), strict=True):
        run.sent_and_acked(message, offset)
        if message.seq == 2:
            run.log(message)  # the duplicate, at offset 3
    run.log(p0[4])
    run.history(p0[4], Outcome.INDETERMINATE, error="_MSG_TIMED_OUT")
    run.sent_and_acked(run.message(a, 0, 5, "k9", 1), 6)
    run.sent_and_acked(run.message(a, 0, 6, "k9", 0), 7)
    # then, at offset 8, a record of A whose value says partition 1 (misplaced), and at 9 one
    # whose seq was changed on the way, 7 -> 8: it still parses, its checksum fails (corrupt)
    run.log_raw(0, encode_value(run.message(a, 1, 9, "k1", 9)))
    run.log_raw(0, corrupted(encode_value(run.message(a, 0, 7, "k0", 5)), b"|7|", b"|8|"))

    # partition 1: seq 2 before seq 1 (offsets 1, 2); a phantom of session B at offset 4.
    p1 = [run.message(a, 1, seq, "k1", seq) for seq in range(4)]
    for message, offset in zip((p1[0], p1[2], p1[1], p1[3]), (0, 1, 2, 3), strict=True):
        run.sent_and_acked(message, offset)
    run.log(run.message(b, 1, 0, "k1", 0))

    # partition 2: seq 2 timed out and is missing (a gap, seen at offset 2 where seq 3 is);
    # seq 4 failed definitely (no gap); seq 7 acked at offset 7 but absent (lost); then a
    # record of another run and a value that is no message at all (foreign).
    p2 = [run.message(a, 2, seq, "k2", seq) for seq in range(8)]
    for seq, offset in ((0, 0), (1, 1), (3, 2), (5, 3), (6, 4)):
        run.sent_and_acked(p2[seq], offset)
    run.history(p2[2], Outcome.INDETERMINATE, error="_MSG_TIMED_OUT")
    run.history(p2[4], Outcome.FAIL, error="MSG_SIZE_TOO_LARGE")
    run.history(p2[7], Outcome.ACK, offset=7)
    other = run.message(a, 2, 0, "k2", 0)
    run.log_raw(2, b"eos1|another-run|" + other.session_id.encode() + b"|0|2|0|k2|0|")
    run.log_raw(2, b"hel\xff\xfelo")  # not UTF-8 either
    return run, {"A": a, "B": b}
