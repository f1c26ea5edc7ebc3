"""Slow and lossy links: the steps as a scenario file gives them, the acknowledgement latencies
read from a history, and the judgement (pure logic: the real rules and the real delay program
are in tests/runtime/test_netfaults.py, the real cluster in the catalogue's replication-delay
and replication-loss cells)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eoslab.nemesis.ack_latency import MIN_ACKED, Window, ack_latencies, slowed, windows
from eoslab.nemesis.steps.link_delay import LinkDelayStep
from eoslab.nemesis.steps.link_loss import LinkLossStep
from eoslab.rundir import HISTORY_SCHEMA
from eoslab.scenarios.catalogue import ScenarioError, parse_scenario


def scenario(*steps: dict[str, Any]) -> Any:
    return parse_scenario(
        {"name": "slow", "description": "d", "targets": ["kafka"], "nemesis": list(steps)}, "slow"
    )


def test_a_slow_and_a_lossy_link_as_a_scenario_gives_them() -> None:
    delay, loss = scenario(
        {"kind": "link-delay", "at": 1, "shape": "isolate-leader", "duration": 5, "delay_ms": 300},
        {"kind": "link-loss", "at": 1, "groups": [["leader"], ["followers"]], "probability": 0.3},
    ).nemesis
    assert isinstance(delay, LinkDelayStep)
    assert (delay.delay_ms, delay.jitter_ms, delay.slower_by_ms()) == (300, 0, 150)
    assert isinstance(loss, LinkLossStep)
    assert loss.probability == 0.3


@pytest.mark.parametrize(
    ("step", "refusal"),
    [
        ({"kind": "link-delay", "shape": "isolate-leader"}, "delay_ms"),
        ({"kind": "link-delay", "shape": "isolate-leader", "delay_ms": 0}, "greater than 0"),
        ({"kind": "link-loss", "shape": "isolate-leader", "probability": 1}, "less than 1"),
        ({"kind": "link-loss", "probability": 0.5}, "give a shape or groups"),
        (
            {
                "kind": "link-loss",
                "shape": "isolate-leader",
                "probability": 0.5,
                "on": ["refbroker"],
            },
            "only link inside the lab is to ZooKeeper",
        ),
    ],
)
def test_a_slow_or_lossy_link_the_lab_cannot_play_is_refused(
    step: dict[str, Any], refusal: str
) -> None:
    with pytest.raises(ScenarioError, match=refusal):
        parse_scenario(
            {
                "name": "slow",
                "description": "d",
                "targets": ["kafka", "refbroker"],
                "nemesis": [{"at": 0, **step}],
            },
            "slow",
        )


def history_part(path: Path, rows: list[tuple[int, int, str, int | None]]) -> None:
    """A history part of (partition, send_ms, outcome, ack_ms) rows."""
    columns: dict[str, list[Any]] = {name: [] for name in HISTORY_SCHEMA.names}
    for seq, (partition, send_ms, outcome, ack_ms) in enumerate(rows):
        values = {
            "run_id": "r",
            "session_id": "s",
            "producer": 0,
            "partition": partition,
            "seq": seq,
            "key": "k",
            "key_seq": seq,
            "send_ms": send_ms,
            "outcome": outcome,
            "offset": seq if outcome == "ack" else None,
            "error": None,
            "ack_ms": ack_ms,
            "latency_ms": None if ack_ms is None else float(ack_ms - send_ms),
        }
        for name in HISTORY_SCHEMA.names:
            columns[name].append(values[name])
    pq.write_table(pa.table(columns, schema=HISTORY_SCHEMA), path)


def test_acknowledgement_latencies_are_read_per_partition_in_their_window(tmp_path: Path) -> None:
    history_part(
        tmp_path / "p0-s-00000.parquet",
        [(0, 1000, "ack", 1010), (1, 1500, "ack", 1800), (0, 999, "ack", 1000)],
    )
    history_part(
        tmp_path / "p0-s-00001.parquet",
        [(0, 1999, "ack", 2500), (0, 2000, "ack", 2001), (0, 1200, "fail", None)],
    )
    (tmp_path / ".p0-s-00002.parquet.partial").write_bytes(b"half a file")
    assert ack_latencies(tmp_path, 1000, 2000) == {0: [10, 501], 1: [300]}


def test_a_link_took_effect_when_some_partition_acknowledged_slower_by_the_bound() -> None:
    assert windows({0: [5] * MIN_ACKED, 1: [5] * (MIN_ACKED - 1)}) == {0: Window(MIN_ACKED, 5)}
    before = {0: Window(300, 20.0), 1: Window(300, 25.0)}
    took, evidence = slowed(before, {0: Window(400, 30.0), 1: Window(400, 400.0)}, 150)
    assert took
    assert evidence.startswith("acknowledgements slowed by 150 ms or more: partition 0: ")
    assert "partition 1: p50 400 ms over 400 during, p50 25 ms over 300 before" in evidence
    took, evidence = slowed(before, {0: Window(400, 160.0), 1: Window(400, 30.0)}, 150)
    assert not took
    assert evidence.startswith("no partition's acknowledgements slowed by 150 ms: ")
    took, evidence = slowed(before, {2: Window(400, 900.0)}, 150)
    assert not took
    assert "no partition had 10 acknowledgements both before and during" in evidence
