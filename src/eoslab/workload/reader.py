"""A reader of the run's topic at one isolation level, as its own OS process:
``python -m eoslab.workload.reader SPEC_JSON``; and :class:`TopicReaders`, which runs one per
isolation level beside a transactional workload.

A reader is what a consumer at that isolation level sees: it reads every partition from its
start while the workload runs (each record with the moment it was read, so that a record read
before its transaction was asked to commit shows), and once asked to finish (SIGTERM) it reads
on to the end offsets of that moment (the last stable offsets under ``read_committed``, the high
watermarks under ``read_uncommitted``), writes ``reads/<isolation>.parquet`` (READS_SCHEMA) and
exits. Its last progress line says how many records it read and whether it reached the end of
every partition (a read that did not is incomplete: the run is invalid).
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from pydantic import BaseModel, ConfigDict

from eoslab.clients import ClientLaunch
from eoslab.clock import now_ms
from eoslab.message import MessageFormatError, decode
from eoslab.run_context import RunContext
from eoslab.rundir import ISOLATIONS, READS_SCHEMA, Isolation, ReadInfo, RunDir
from eoslab.workload.drivers.api import ClientApi, ConsumerApi
from eoslab.workload.parts import write_part
from eoslab.workload.sessions import SessionProcess, stop_all

POLL_S = 0.1
PROGRESS_INTERVAL_S = 0.5
FINISH_TIMEOUT_S = 60.0
"""How long a reader may take to read on to the end once asked to finish."""
CALL_TIMEOUT_S = 10.0


class ReaderSpec(BaseModel):
    """What one reader reads (the executor passes it as JSON)."""

    model_config = ConfigDict(extra="forbid")

    run_dir: Path
    run_id: str
    bootstrap: str
    topic: str
    partitions: int
    isolation: Isolation
    finish_timeout_s: float = FINISH_TIMEOUT_S
    client: ClientLaunch | None = None
    """The client the reader runs (None: the workload's own librdkafka)."""


class TopicReader:
    def __init__(self, spec: ReaderSpec) -> None:
        self.spec = spec
        self.run_dir = RunDir(spec.run_dir)
        self.rows: dict[str, list[Any]] = {name: [] for name in READS_SCHEMA.names}
        self.finishing = False
        self.end_offsets: dict[int, int] = {}
        self.positions: dict[int, int] = dict.fromkeys(range(spec.partitions), 0)
        """Per partition, where the reader is: past its last record, or at the end offset an
        end-of-partition event named."""
        self.client = ClientApi(spec.client)
        self.consumer = self.client.consumer(
            {
                "bootstrap.servers": spec.bootstrap,
                "group.id": f"eoslab-reader-{spec.run_id}-{spec.isolation}",
                "isolation.level": spec.isolation,
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
            }
        )
        self._last_progress = 0.0

    def run(self) -> None:
        spec = self.spec
        self.consumer.assign(
            [TopicPartition(spec.topic, p, OFFSET_BEGINNING) for p in range(spec.partitions)]
        )
        deadline: float | None = None
        while True:
            if self.finishing and deadline is None:
                deadline = time.monotonic() + spec.finish_timeout_s
            if deadline is not None and not self.end_offsets:
                try:
                    self.end_offsets = end_offsets(self.consumer, spec.topic, spec.partitions)
                except KafkaException as error:
                    print(f"end offsets: {error}", file=sys.stderr, flush=True)
            if deadline is not None and (self.complete or time.monotonic() > deadline):
                break
            message = self.consumer.poll(POLL_S)
            if message is not None:
                self._take(message)
            if time.monotonic() - self._last_progress >= PROGRESS_INTERVAL_S:
                self._progress(done=False)
        self.consumer.close()
        self.client.close()
        write_part(
            pa.Table.from_pydict(self.rows, schema=READS_SCHEMA),
            self.run_dir.reads_file(spec.isolation),
        )
        self._progress(done=True)

    @property
    def complete(self) -> bool:
        """Every partition read to the end offset taken when finishing began."""
        return bool(self.end_offsets) and all(
            self.positions[p] >= end for p, end in self.end_offsets.items()
        )

    def _take(self, message: Any) -> None:
        error = message.error()
        partition = message.partition()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                self.positions[partition] = max(self.positions[partition], message.offset())
                return
            print(f"reading: {error.name()}: {error.str()}", file=sys.stderr, flush=True)
            return
        offset = message.offset()
        self.positions[partition] = max(self.positions[partition], offset + 1)
        try:
            record = decode(message.key(), message.value())
            fields: tuple[Any, ...] = (
                record.session_id,
                record.producer,
                record.seq,
                record.key,
                record.key_seq,
            )
            if record.run_id != self.spec.run_id:
                fields = (None,) * 5
        except MessageFormatError:
            fields = (None,) * 5
        row = (self.spec.run_id, self.spec.isolation, partition, offset, *fields, now_ms())
        for name, value in zip(READS_SCHEMA.names, row, strict=True):
            self.rows[name].append(value)

    def _progress(self, *, done: bool) -> None:
        self._last_progress = time.monotonic()
        line = {
            "records": len(self.rows["offset"]),
            "done": done,
            "complete": self.complete,
            "end_offsets": self.end_offsets,
        }
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()

    def finish(self, *_: object) -> None:
        self.finishing = True


class TopicReaders:
    """One reader process per isolation level, for the whole of a run."""

    def __init__(self, context: RunContext) -> None:
        self.context = context
        self._processes: dict[Isolation, SessionProcess] = {}

    def start(self) -> None:
        run_dir = self.context.run_dir.create_transactions()
        for isolation in ISOLATIONS:
            spec = ReaderSpec(
                run_dir=run_dir.path,
                run_id=self.context.run_id,
                bootstrap=self.context.bootstrap,
                topic=self.context.topic,
                partitions=self.context.partitions,
                isolation=isolation,
                client=self.context.client,
            )
            self._processes[isolation] = SessionProcess(
                "eoslab.workload.reader",
                spec.model_dump_json(),
                run_dir.reader_log_file(isolation),
                on_exit=lambda _process: None,
                client=self.context.client,
            )

    def finish(self, stable_timeout_s: float) -> tuple[list[ReadInfo], dict[int, list[int]]]:
        """Wait (up to ``stable_timeout_s``) until no transaction is open in the topic, then ask
        every reader to read on to the end and write its reads: what each read, and the
        partitions a transaction still held then (a transaction left open, e.g. by a killed
        producer never restarted, holds read_committed readers back until the coordinator aborts
        it; one no coordinator knows, KAFKA-12671, holds them for ever)."""
        held = wait_stable(self.context, stable_timeout_s)
        stop_all(self._processes.values(), FINISH_TIMEOUT_S + 10)
        return [
            ReadInfo(
                isolation=isolation,
                records=int(process.progress.get("records", 0)),
                complete=bool(process.progress.get("done") and process.progress.get("complete")),
                end_offsets={
                    int(p): int(o) for p, o in process.progress.get("end_offsets", {}).items()
                },
            )
            for isolation, process in self._processes.items()
        ], held


def end_offsets(consumer: ConsumerApi, topic: str, partitions: int) -> dict[int, int]:
    """ListOffsets(latest) per partition as ``consumer``'s isolation level sees it: the last
    stable offsets under read_committed, the high watermarks under read_uncommitted."""
    return {
        p: int(consumer.get_watermark_offsets(TopicPartition(topic, p), CALL_TIMEOUT_S)[1])
        for p in range(partitions)
    }


def wait_stable(context: RunContext, timeout_s: float) -> dict[int, list[int]]:
    """Until every partition's last stable offset is its high watermark (no transaction open:
    an empty answer) or the timeout: then the partitions still held, each with its [last stable
    offset, high watermark]."""
    consumers = {
        isolation: Consumer(
            {
                "bootstrap.servers": context.bootstrap,
                "group.id": f"eoslab-stable-{context.run_id}-{isolation}",
                "isolation.level": isolation,
            }
        )
        for isolation in ISOLATIONS
    }
    deadline = time.monotonic() + timeout_s
    held: dict[int, list[int]] = {p: [-1, -1] for p in range(context.partitions)}
    try:
        while True:
            try:
                stable, high = (
                    end_offsets(consumers[isolation], context.topic, context.partitions)
                    for isolation in ("read_committed", "read_uncommitted")
                )
                held = {p: [stable[p], high[p]] for p in high if stable[p] < high[p]}
                if not held:
                    return held
            except KafkaException as error:
                print(f"stable offsets: {error}", file=sys.stderr, flush=True)
            if time.monotonic() > deadline:
                return held
            time.sleep(0.5)
    finally:
        for consumer in consumers.values():
            consumer.close()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m eoslab.workload.reader SPEC_JSON", file=sys.stderr)
        return 2
    reader = TopicReader(ReaderSpec.model_validate_json(argv[0]))
    signal.signal(signal.SIGTERM, reader.finish)
    reader.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
