"""`make soak`: malformed frames and crash cycles against the reference broker, figures as JSON.

Writes bench/results/soak-<UTC time>.json (machine, parameters, figures, verdict) and prints a
short table. Exits 1 when a figure that must be zero is not (crashes, hangs, lost or
duplicated records, internal errors, a log that reloads short).
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from eoslab.settings import project_root
from eoslab.soak.crash_cycles import CrashParams, run_crash_cycles
from eoslab.soak.malformed import MalformedParams, run_malformed
from eoslab.soak.verdict import problems

app = typer.Typer(add_completion=False)


def _machine() -> dict[str, object]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }


def _table(results: dict[str, object]) -> Table:
    table = Table(title="make soak: the reference broker")
    table.add_column("figure")
    table.add_column("value", justify="right")
    malformed = results.get("malformed")
    if isinstance(malformed, dict):
        outcomes = malformed["outcomes"]
        memory = malformed["memory"]
        ledger = malformed["ledger"]
        rows = [
            ("frames tried", malformed["frames"]),
            ("frames per second", malformed["frames_per_s"]),
            ("answered / closed", f"{outcomes.get('answered', 0)} / {outcomes.get('closed', 0)}"),
            ("hangs", outcomes.get("hang", 0)),
            ("broker crashes", malformed["crashes"]),
            ("broker internal errors", malformed["internal_errors"]),
            ("max RSS (MB), growth", f"{memory.get('max_rss_mb')}, x{memory.get('growth_ratio')}"),
            ("ledger acked / lost / dup", f"{ledger['acknowledged']} / {ledger['lost']} / "
             f"{ledger['duplicates_within_session']}"),
        ]  # fmt: skip
        for name, value in rows:
            table.add_row(name, str(value))
    crash = results.get("crash_cycles")
    if isinstance(crash, dict):
        ledger = crash["ledger"]
        rows = [
            ("kill -9 cycles", crash["cycles"]),
            ("seconds per cycle", crash["seconds_per_cycle"]),
            ("reloads missing acked records", crash["reloads_missing_acked_records"]),
            ("acked / lost / dup", f"{ledger['acknowledged']} / {ledger['lost']} / "
             f"{ledger['duplicates_within_session']}"),
        ]  # fmt: skip
        for name, value in rows:
            table.add_row(name, str(value))
    return table


@app.command()
def soak(
    *,
    frames: Annotated[
        int, typer.Option(min=0, help="Malformed frames to send (0: skip).")
    ] = 1_000_000,
    frames_max_seconds: Annotated[
        float,
        typer.Option(
            min=1, help="Stop sending frames after this long (frames tried are reported)."
        ),
    ] = 1100.0,
    cycles: Annotated[int, typer.Option(min=0, help="kill -9 / restart cycles (0: skip).")] = 100,
    cycles_max_seconds: Annotated[
        float, typer.Option(min=1, help="No kill after this long (cycles done are reported).")
    ] = 420.0,
    seed: Annotated[int, typer.Option(help="Seed of the frames and of the kill timing.")] = 0,
    workers: Annotated[int, typer.Option(min=1, help="Concurrent fuzz connections.")] = 8,
    timeout_s: Annotated[float, typer.Option(min=0.1, help="Seconds to wait for an answer.")] = 5.0,
    out: Annotated[Path | None, typer.Option(help="Folder for the JSON.")] = None,
) -> None:
    """Malformed frames at the reference broker, then kill -9 cycles under a producer."""
    folder = out or project_root() / "bench" / "results"
    started = time.time()
    results: dict[str, object] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "machine": _machine(),
    }
    with tempfile.TemporaryDirectory(prefix="eoslab-soak-") as work:
        if frames:
            params = MalformedParams(
                frames, seed=seed, workers=workers, timeout_s=timeout_s,
                max_seconds=frames_max_seconds,
            )  # fmt: skip
            results["malformed"] = run_malformed(params, Path(work))
        if cycles:
            crash = CrashParams(cycles, seed=seed, max_seconds=cycles_max_seconds)
            results["crash_cycles"] = run_crash_cycles(crash, Path(work))
    results["seconds"] = round(time.time() - started, 1)
    found = problems(results)
    results["verdict"] = {"ok": not found, "problems": found}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"soak-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(started))}.json"
    path.write_text(json.dumps(results, indent=2))
    console = Console()
    console.print(_table(results))
    console.print(f"{'OK' if not found else 'PROBLEMS: ' + '; '.join(found)} — written to {path}")
    raise typer.Exit(0 if not found else 1)


if __name__ == "__main__":
    app(prog_name="python -m eoslab.soak")
