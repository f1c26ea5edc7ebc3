"""The naive checker's consumer half: the consumer anomalies of a run in one process, from the
consumption ledger (pyarrow), the sink (the workload's own ``Sink``) and the records of the log.

A second, independent derivation of :mod:`eoslab.verify.consumer.anomalies` (see it for the
definitions), with dictionaries instead of windows, that the tests hold the Spark one against.
A record is its place in the log (partition, offset) with the identity its value gives
((session, key, key_seq); None for a foreign record): a processing or an effect belongs to the
record at its place with its identity. A message is that identity, whichever copy.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from eoslab.rundir import COMMITS_SCHEMA, PROCESSED_SCHEMA, ConsumptionInfo, Effect, RunDir
from eoslab.verify.consumer.sink_location import sink_database
from eoslab.workload.consumer.sink.database import Sink

Place = tuple[int, int]
"""(partition, offset)."""
Identity = tuple[str, str, int]
"""(producer session, key, key_seq): a message of the run."""
Record = tuple[Place, Identity | None]
"""A record of the log; None: a foreign record."""

SELECT_EFFECTS = (
    "SELECT kafka_partition, kafka_offset, producer_session, key, key_seq, apply_order FROM effects"
)


@dataclass(frozen=True)
class Processing:
    place: Place
    identity: Identity | None
    effect: str
    epoch: tuple[str, int, int]
    """(consumer session, generation, assignment): the member's assignment epoch it was
    processed in."""
    n: int
    """Its number among its session's processings (processing order)."""
    watermark: int | None = None
    """The partition's high watermark its client's fetches last told (None: not told)."""


@dataclass(frozen=True)
class Commit:
    """A successful commit of one partition."""

    partition: int
    offset: int
    order: tuple[int, str, int]
    """(committed_ms, consumer session, commit number): commit order."""


@dataclass(frozen=True)
class SinkEffect:
    place: Place
    identity: Identity
    apply_order: int


def read_processings(run: RunDir) -> list[Processing]:
    """The processed rows of the consumption ledger."""
    rows = _rows(run.processed_dir, PROCESSED_SCHEMA)
    return [
        Processing(
            (r["partition"], r["offset"]),
            None if r["session_id"] is None else (r["session_id"], r["key"], r["key_seq"]),
            r["effect"],
            (r["consumer_session"], r["generation"], r["assignment"]),
            r["n"],
            r["watermark"],
        )
        for r in rows
    ]


def read_commits(run: RunDir) -> list[Commit]:
    """The successful commits, a row per partition."""
    return [
        Commit(r["partition"], r["offset"], (r["committed_ms"], r["consumer_session"], r["commit"]))
        for r in _rows(run.commits_dir, COMMITS_SCHEMA)
        if r["error"] is None
    ]


def committed_offsets(commits: Iterable[Commit]) -> dict[int, int]:
    """Partition -> the highest offset a successful commit set."""
    committed: dict[int, int] = {}
    for c in commits:
        committed[c.partition] = max(c.offset, committed.get(c.partition, -1))
    return committed


def read_sink_effects(consumption: ConsumptionInfo, run_dir: Path) -> list[SinkEffect]:
    """Every row of the sink's ``effects`` table."""
    sink = Sink(sink_database(consumption.sink, run_dir))
    try:
        with sink.transaction() as tx:
            rows = tx.execute(SELECT_EFFECTS)
    finally:
        sink.close()
    return [
        SinkEffect((int(p), int(o)), (session, key, int(key_seq)), int(order))
        for p, o, session, key, key_seq, order in rows
    ]


def _rows(folder: Path, schema: pa.Schema) -> list[dict[str, Any]]:
    if not any(folder.glob("*.parquet")):
        return []
    return ds.dataset(folder, schema=schema, format="parquet").to_table().to_pylist()


def count_consumer_anomalies(
    records: Iterable[Record],
    processings: Iterable[Processing],
    effects: Iterable[SinkEffect],
    commits: Iterable[Commit],
) -> dict[str, int]:
    """Every consumer anomaly count (the names of :data:`eoslab.rundir.CONSUMER_ANOMALIES`)."""
    records = list(records)
    processings = list(processings)
    commits = list(commits)
    committed = committed_offsets(commits)
    processed: Counter[Record] = Counter()
    processed_messages: set[Identity] = set()
    for p in processings:
        processed[(p.place, p.identity)] += 1
        if p.identity is not None and p.effect != Effect.FOREIGN:
            processed_messages.add(p.identity)
    landed: Counter[Record] = Counter()
    of_message: dict[Identity, list[SinkEffect]] = defaultdict(list)
    for e in effects:
        landed[(e.place, e.identity)] += 1
        of_message[e.identity].append(e)

    def committed_past(place: Place) -> bool:
        partition, offset = place
        return partition in committed and offset < committed[partition]

    return {
        "unprocessed": sum(
            1
            for record in records
            if committed_past(record[0]) and not processed[record] and not landed[record]
        ),
        "redelivered": sum(n - 1 for n in processed.values()),
        "effect_duplicate": sum(len(copies) - 1 for copies in of_message.values()),
        "effect_reorder": _effect_reorders(of_message),
        "effect_lost": len(processed_messages - of_message.keys()),
        **_poll_anomalies(processings, {place for place, _ in records}),
        "watermark_regression": _watermark_regressions(processings),
        "offset_regression": _offset_regressions(commits),
        "inconsistent_offset": _inconsistent_offsets(records, processings),
    }


def _inconsistent_offsets(records: Iterable[Record], processings: Iterable[Processing]) -> int:
    """Places a processing read that were found holding more than one message of the run, by
    the processings and the log together (foreign records hold none)."""
    found: dict[Place, set[Identity]] = defaultdict(set)
    processed_places = set()
    for p in processings:
        processed_places.add(p.place)
        if p.identity is not None:
            found[p.place].add(p.identity)
    for place, identity in records:
        if identity is not None and place in processed_places:
            found[place].add(identity)
    return sum(1 for identities in found.values() if len(identities) > 1)


def _poll_anomalies(processings: Iterable[Processing], in_log: set[Place]) -> dict[str, int]:
    """Per assignment epoch and partition, processings in processing order: jumps over records
    of the log (one per jump), and steps back to or below the offset before."""
    epochs: dict[tuple[str, int, int, int], list[tuple[int, int]]] = defaultdict(list)
    for p in processings:
        epochs[(*p.epoch, p.place[0])].append((p.n, p.place[1]))
    skips = backs = 0
    for (*_, partition), polled in epochs.items():
        offsets = [offset for _, offset in sorted(polled)]
        for before, offset in pairwise(offsets):
            backs += offset <= before
            skips += any((partition, o) in in_log for o in range(before + 1, offset))
    return {"poll_skip": skips, "nonmonotonic_poll": backs}


def _watermark_regressions(processings: Iterable[Processing]) -> int:
    """Per consumer session and partition, in processing order: processings whose high
    watermark is below the highest one told before (those without one left out)."""
    told: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for p in processings:
        if p.watermark is not None:
            told[(p.epoch[0], p.place[0])].append((p.n, p.watermark))
    return sum(_below_highest(watermark for _, watermark in sorted(w)) for w in told.values())


def _below_highest(values: Iterable[int]) -> int:
    """How many of ``values``, in their order, are below the highest one before them."""
    below, highest = 0, -1
    for value in values:
        below += value < highest
        highest = max(highest, value)
    return below


def _offset_regressions(commits: Iterable[Commit]) -> int:
    """Successful commits of a partition below the one before them, in commit order."""
    by_partition: dict[int, list[Commit]] = defaultdict(list)
    for c in commits:
        by_partition[c.partition].append(c)
    regressions = 0
    for partition_commits in by_partition.values():
        offsets = [c.offset for c in sorted(partition_commits, key=lambda c: c.order)]
        regressions += sum(1 for before, now in pairwise(offsets) if now < before)
    return regressions


def _effect_reorders(of_message: Mapping[Identity, list[SinkEffect]]) -> int:
    """Per (session, key): messages whose first effect (in the log order of the copy it was read
    from, then apply order) was applied after the first effect of a higher key_seq."""
    firsts: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for (session, key, key_seq), copies in of_message.items():
        first = min(copies, key=lambda e: (e.place, e.apply_order))
        firsts[(session, key)].append((first.apply_order, key_seq))
    return sum(_below_highest(key_seq for _, key_seq in sorted(s)) for s in firsts.values())
