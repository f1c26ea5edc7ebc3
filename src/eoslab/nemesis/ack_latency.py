"""How long the producers waited for their acknowledgements, per partition, from the history
written so far: what a slow or lossy link inside the cluster shows a client (with acks=all an
acknowledgement waits for the followers' fetches, which cross the links between the nodes).

A slow-link step compares the records sent while its links were slow with those sent in the
:data:`BEFORE_MS` just before, partition by partition: the link slows the partitions whose
replication crosses it, not the others."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from eoslab.rundir import Outcome

BEFORE_MS = 3000
"""The window just before the fault: enough acknowledgements at the lab's rates, and short, so
that a client's start-up (a JVM's first seconds: medians near a second measured) stays out of it
when the fault begins a few seconds into the run."""
MIN_ACKED = 10
"""Acknowledgements a window needs in a partition for its median to say anything."""


@dataclass(frozen=True)
class Window:
    """The acknowledgements of the records one partition sent in a window of time."""

    acked: int
    p50_ms: float

    def __str__(self) -> str:
        return f"p50 {self.p50_ms:.0f} ms over {self.acked}"


def ack_latencies(history_dir: Path, since_ms: int, until_ms: int) -> dict[int, list[int]]:
    """Per partition, how long each record sent in [since_ms, until_ms) and acknowledged waited
    for its acknowledgement (ms), from the history's part files written so far."""
    found: dict[int, list[int]] = {}
    for part in sorted(history_dir.glob("*.parquet")):
        try:
            table = pq.read_table(part, columns=["partition", "send_ms", "outcome", "ack_ms"])
        except (OSError, ValueError):
            continue  # a part being replaced: the next look sees it
        sent = table["send_ms"]
        keep = pc.and_(
            pc.and_(pc.greater_equal(sent, since_ms), pc.less(sent, until_ms)),
            pc.equal(table["outcome"], Outcome.ACK.value),
        )
        rows = table.filter(keep).to_pydict()
        for partition, send, ack in zip(
            rows["partition"], rows["send_ms"], rows["ack_ms"], strict=True
        ):
            if ack is not None:
                found.setdefault(partition, []).append(ack - send)
    return found


def windows(latencies: dict[int, list[int]]) -> dict[int, Window]:
    """Each partition's window, where it has :data:`MIN_ACKED` acknowledgements or more."""
    return {
        partition: Window(len(waits), statistics.median(waits))
        for partition, waits in sorted(latencies.items())
        if len(waits) >= MIN_ACKED
    }


def slowed(before: dict[int, Window], during: dict[int, Window], by_ms: float) -> tuple[bool, str]:
    """Whether some partition's acknowledgements took ``by_ms`` longer (median) while the links
    were slow or lossy than just before, and the evidence in one line."""
    common = sorted(before.keys() & during.keys())
    if not common:
        return False, (
            f"no partition had {MIN_ACKED} acknowledgements both before and during the fault "
            f"(before: {len(before)} partition(s), during: {len(during)})"
        )
    lines = [f"partition {p}: {during[p]} during, {before[p]} before" for p in common]
    rose = [p for p in common if during[p].p50_ms >= before[p].p50_ms + by_ms]
    if not rose:
        return False, f"no partition's acknowledgements slowed by {by_ms:.0f} ms: " + "; ".join(
            lines
        )
    return True, f"acknowledgements slowed by {by_ms:.0f} ms or more: " + "; ".join(lines)
