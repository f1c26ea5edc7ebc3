"""A matrix's progress read from its run directories: each cell's phase, records and time."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

from rich.console import Console

from eoslab.orchestration.command import _matrix_table
from eoslab.orchestration.matrix import Cell, plan
from eoslab.orchestration.progress import CellProgress, Phase, label, watch
from eoslab.rundir import RunDir
from synthetic_runs import RECORDS, make_run

CELLS = [
    Cell("baseline", "kafka"),
    Cell("baseline", "refbroker"),
    Cell("lost-acks", "kafka"),
    Cell("consumer-crash-before-commit", "kafka", mode="dedup-table"),
    Cell("no-idempotence", "kafka"),
]


def test_each_cell_shows_the_phase_its_run_directory_is_in(tmp_path: Path) -> None:
    make_run(tmp_path, "baseline", "kafka")
    running = RunDir(make_run(tmp_path, "baseline", "refbroker", checked=False))
    running.write_info(running.read_info().model_copy(update={"ended_ms": None}))
    make_run(tmp_path, "lost-acks", "kafka", checked=False)
    make_run(
        tmp_path,
        "consumer-crash-before-commit",
        "kafka",
        mode="dedup-table",
        observed={"effect_duplicate": 2},
    )
    (tmp_path / "half-written").mkdir()
    (tmp_path / "half-written" / "run.json").write_text('{"run_id": ')

    progress = watch(CELLS, tmp_path)

    assert [(p.name, p.phase) for p in progress] == [
        ("baseline/kafka", Phase.CONFORMS),
        ("baseline/refbroker", Phase.RUNNING),
        ("lost-acks/kafka", Phase.CHECKING),
        ("consumer-crash-before-commit.dedup-table/kafka", Phase.DOES_NOT_CONFORM),
        ("no-idempotence/kafka", Phase.WAITING),
    ]
    assert [p.records for p in progress] == [RECORDS] * 4 + [0]
    assert progress[3].mismatches == ("effect_duplicate: expected 0, observed 2",)
    assert progress[0].elapsed_s > 0
    assert progress[4].run_dir is None


def test_the_matrix_table_gives_each_default_cell_one_line_at_80_columns() -> None:
    """`make lab`'s terminal: the live matrix fits 80 columns, a line a cell, its names whole."""
    names = [label(cell) for cell in plan({"matrix": "default"})]
    progress = [CellProgress(n, Phase.CONFORMS, records=3000, elapsed_s=173) for n in names]
    out = StringIO()
    Console(file=out, width=80, force_terminal=False).print(_matrix_table(progress))
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines)
    for name in names:
        (row,) = [line for line in lines if name in line.split()]
        assert row.split()[1:] == ["conforms", "3000", "173", "s"]  # nothing cut
    assert len(lines) <= len(names) + 5  # a title, a header, its rule, blank edges
