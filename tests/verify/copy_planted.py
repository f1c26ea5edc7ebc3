"""Planted copies (consume-transform-produce): the planted transaction history of
txn_planted.py as the copier's input, and the output topic's read_committed read written by hand
(copy-topic/ in the run directory, as the checker keeps it), so that every copy anomaly sits at
a known place.

The clean copy (:func:`clean_copies`): every input the read_committed reader read copied once,
to the same partition of the output, in read order; the copier group committed every
partition's end. Each plant changes one thing and names where the anomaly must be found.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from txn_planted import RUN_ID, SESSION, PlantedHistory, clean

from eoslab.message import Copy, Message, encode_copy, encode_value
from eoslab.rundir import RunDir
from eoslab.verify.copy.naive import CopyRecord, parse_copy

COPIER = "c0"
Location = tuple[str, int, int, int, int | None, int | None]
SNAPSHOT = pa.schema(
    [
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("timestamp", pa.timestamp("ms")),
    ]
)


@dataclass
class PlantedCopy:
    history: PlantedHistory
    copies: list[tuple[int, int, int]]
    """(input partition, input seq, input offset) of each copy, in output order."""
    committed: dict[int, int]

    def rows(self) -> list[dict[str, object]]:
        """The output topic's records: copy i of partition p at output offset 2i (a marker
        after each, as it were), a foreign record at the end of partition 0."""
        out_next: dict[int, int] = {}
        rows: list[dict[str, object]] = []
        for number, (partition, seq, offset) in enumerate(self.copies):
            message = Message(RUN_ID, SESSION, 0, partition, seq, f"k{partition}", seq)
            value = encode_copy(Copy(partition, offset, COPIER, number, encode_value(message)))
            out = out_next.get(partition, 0)
            out_next[partition] = out + 2
            rows.append(_row(partition, out, value))
        rows.append(_row(0, out_next.get(0, 0), b"not a copy"))
        return rows

    def records(self) -> list[CopyRecord]:
        """The copies as the naive checker parses them."""
        parsed = (parse_copy(r["partition"], r["offset"], r["value"], RUN_ID) for r in self.rows())  # type: ignore[arg-type]
        return [copy for copy in parsed if copy is not None]

    def write(self, root: Path) -> RunDir:
        run = self.history.write(root)
        run.copy_topic_dir.mkdir()
        pq.write_table(
            pa.Table.from_pylist(self.rows(), schema=SNAPSHOT),
            run.copy_topic_dir / "part-0.parquet",
        )
        (run.copy_topic_dir / "_SUCCESS").touch()
        return run

    def out_place(self, index: int) -> tuple[int, int]:
        """(out_partition, out_offset) of copy ``index``."""
        partition = self.copies[index][0]
        return partition, 2 * sum(1 for c in self.copies[:index] if c[0] == partition)


def _row(partition: int, offset: int, value: bytes) -> dict[str, object]:
    return {"partition": partition, "offset": offset, "key": b"k", "value": value, "timestamp": 0}


def clean_copies(skip: tuple[int, ...] = ()) -> PlantedCopy:
    """Every visible input copied once (but those at indexes ``skip`` of the reads)."""
    history = clean()
    copies = [
        (r["partition"], r["seq"], r["offset"])
        for index, r in enumerate(history.reads)
        if index not in skip
    ]
    ends = {p: max(r["offset"] for r in history.reads if r["partition"] == p) + 1 for p in (0, 1)}
    return PlantedCopy(history, copies, ends)


def planted(name: str) -> tuple[PlantedCopy, list[Location]]:
    """The clean copy with one anomaly planted, and where it must be found."""
    if name in ("lost_copy", "committed_uncopied"):
        planted_copy = clean_copies(skip=(2,))
        read = planted_copy.history.reads[2]
        if name == "lost_copy":  # not committed past: the copier had not got there
            planted_copy.committed = {
                p: o for p, o in planted_copy.committed.items() if p != read["partition"]
            }
        return planted_copy, [(SESSION, read["partition"], read["seq"], read["offset"], None, None)]
    planted_copy = clean_copies()
    if name == "duplicate_copy":
        partition, seq, offset = planted_copy.copies[1]
        planted_copy.copies.append((partition, seq, offset))
        where = planted_copy.out_place(len(planted_copy.copies) - 1)
        return planted_copy, [(SESSION, partition, seq, offset, *where)]
    if name == "copy_of_aborted":  # txn 1 aborted: (0, 2), never read, at input offset 99
        planted_copy.copies.append((0, 2, 99))
        where = planted_copy.out_place(len(planted_copy.copies) - 1)
        return planted_copy, [(SESSION, 0, 2, 99, *where)]
    raise ValueError(name)


ALSO: dict[str, dict[str, int]] = {"committed_uncopied": {"lost_copy": 1}}
"""Other anomalies a plant shows by definition: an input left uncopied below the committed
offset is lost too."""
