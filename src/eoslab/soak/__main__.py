"""`make soak`: malformed frames, crash cycles, a sustained load through the proxy and 100,000
producer ids against the reference broker, figures as JSON.

Writes bench/results/soak-<UTC time>.json (machine, parameters, figures, verdict) and prints a
short table. Exits 1 when a figure that must be zero is not (crashes, hangs, lost or
duplicated records, internal errors, a log that reloads short, producer state that does not
expire, memory that grows).
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from eoslab.settings import project_root
from eoslab.soak.crash_cycles import CrashParams, run_crash_cycles
from eoslab.soak.kafka_cycles import KafkaCycleParams, run_kafka_cycles
from eoslab.soak.load import LoadParams, run_load
from eoslab.soak.malformed import MalformedParams, run_malformed
from eoslab.soak.producer_ids import ProducerIdParams, run_producer_ids
from eoslab.soak.verdict import problems

app = typer.Typer(add_completion=False)


def _machine() -> dict[str, object]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }


def _witness_row(witness: dict[str, int]) -> str:
    return (
        f"{witness['acknowledged']} / {witness['lost']} / {witness['duplicates_within_session']}"
        f" / {witness['misplaced']} / {witness['acknowledged_without_offset']}"
    )


def _malformed_rows(figures: dict[str, Any]) -> list[tuple[str, object]]:
    outcomes = figures["outcomes"]
    rows: list[tuple[str, object]] = [
        ("frames tried", figures["frames"]),
        ("frames per second", figures["frames_per_s"]),
        ("answered / closed", f"{outcomes.get('answered', 0)} / {outcomes.get('closed', 0)}"),
        ("hangs", outcomes.get("hang", 0)),
        ("broker internal errors", figures["internal_errors"]),
    ]
    for name, server in figures["servers"].items():
        memory = server["memory"]
        rows.append((f"{name} crashes", server["crashes"]))
        rows.append(
            (
                f"{name} max RSS (MB), growth",
                f"{memory.get('max_rss_mb')}, x{memory.get('growth_ratio')}",
            )
        )
    rows.append(
        ("witness acked / lost / dup / misplaced / no offset", _witness_row(figures["witness"]))
    )
    return rows


def _table(results: dict[str, object]) -> Table:
    table = Table(title="make soak: the reference broker")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for phase, label in (("malformed", ""), ("malformed_via_proxy", "via proxy: ")):
        figures = results.get(phase)
        if isinstance(figures, dict):
            for name, value in _malformed_rows(figures):
                table.add_row(label + name, str(value))
    crash = results.get("crash_cycles")
    if isinstance(crash, dict):
        witness, group = crash["witness"], crash["consumer_group"]
        rows = [
            ("kill -9 cycles", crash["cycles"]),
            ("seconds per cycle", crash["seconds_per_cycle"]),
            ("reloads missing acked records", crash["reloads_missing_acked_records"]),
            ("acked / lost / dup / misplaced / no offset", _witness_row(witness)),
            ("group commits acknowledged / went backwards", f"{group['acknowledged_commits']} / "
             f"{group['restarts_with_committed_offset_behind_an_acknowledged_commit']}"),
            ("transactions committed / aborted / unknown",
             " / ".join(str(n) for n in crash["transactions"]["transactions"].values())),
            ("transactions: lost / aborted read / torn", f"{crash['transactions']['lost_committed']}"
             f" / {crash['transactions']['aborted_read']} / {crash['transactions']['torn']}"),
        ]  # fmt: skip
        for name, value in rows:
            table.add_row(name, str(value))
    rows = (
        _load_rows(results.get("load"))
        + _producer_id_rows(results.get("producer_ids"))
        + _kafka_cycle_rows(results.get("kafka_cycles"))
    )
    for name, value in rows:
        table.add_row(name, str(value))
    return table


def _load_rows(load: object) -> list[tuple[str, object]]:
    if not isinstance(load, dict):
        return []
    rows: list[tuple[str, object]] = []
    for name, stream in load["streams"].items():
        rows.append(
            (f"load {name}: MiB, MiB/s, lost", f"{stream['mebibytes']}, {stream['mib_per_s']}, "
             f"{stream['lost']}")
        )  # fmt: skip
    for compression, ratio in load["proxy_over_direct"].items():
        rows.append((f"load {compression}: proxy / direct", ratio))
    memory = load["servers"]["proxy"]["memory"]
    rows.append(("load: proxy max RSS (MB), growth", f"{memory.get('max_rss_mb')}, "
                 f"x{memory.get('growth_ratio')}"))  # fmt: skip
    return rows


def _kafka_cycle_rows(figures: object) -> list[tuple[str, object]]:
    if not isinstance(figures, dict):
        return []
    rows: list[tuple[str, object]] = []
    for target in figures["parameters"]["targets"]:
        cycles = figures[target]
        rows.append((f"{target} leader kills, seconds each", f"{cycles['cycles']}, "
                     f"{cycles['seconds_per_cycle']}"))  # fmt: skip
        rows.append(
            (
                f"{target} acked / lost / dup / misplaced / no offset",
                _witness_row(cycles["witness"]),
            )
        )
    return rows


def _producer_id_rows(figures: object) -> list[tuple[str, object]]:
    if not isinstance(figures, dict):
        return []
    return [
        (f"producer ids wave {n}: held / left after expiry / RSS MB",
         f"{wave['held_after_wave']} / {wave['left_after_expiry']} / "
         f"{wave['rss_mb_holding_them']}")
        for n, wave in enumerate(figures["waves"], start=1)
    ]  # fmt: skip


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
    ] = 600.0,
    proxy_frames: Annotated[
        int, typer.Option(min=0, help="Malformed frames through the chaos proxy (0: skip).")
    ] = 200_000,
    proxy_frames_max_seconds: Annotated[
        float, typer.Option(min=1, help="Stop sending frames through the proxy after this long.")
    ] = 200.0,
    cycles: Annotated[int, typer.Option(min=0, help="kill -9 / restart cycles (0: skip).")] = 100,
    cycles_max_seconds: Annotated[
        float, typer.Option(min=1, help="No kill after this long (cycles done are reported).")
    ] = 420.0,
    load_mib: Annotated[
        int,
        typer.Option(
            min=0, help="MiB of record values per load stream, direct and via the proxy (0: skip)."
        ),
    ] = 1024,
    producer_ids: Annotated[
        int, typer.Option(min=0, help="Idle producer ids per wave (two waves; 0: skip).")
    ] = 100_000,
    kafka_cycles: Annotated[
        int,
        typer.Option(min=0, help="Leader kill -9 cycles on each real Kafka cluster (0: skip)."),
    ] = 20,
    kafka_port_offset: Annotated[
        int, typer.Option(min=0, help="Port offset of the soak's own Kafka labs.")
    ] = KafkaCycleParams.port_offset,
    producer_id_expiration_ms: Annotated[
        int,
        typer.Option(min=1000, help="producer.id.expiration.ms of the producer-id soak's broker."),
    ] = ProducerIdParams.expiration_ms,
    seed: Annotated[int, typer.Option(help="Seed of the frames and of the kill timing.")] = 0,
    workers: Annotated[int, typer.Option(min=1, help="Concurrent fuzz connections.")] = 8,
    timeout_s: Annotated[float, typer.Option(min=0.1, help="Seconds to wait for an answer.")] = 5.0,
    out: Annotated[Path | None, typer.Option(help="Folder for the JSON.")] = None,
) -> None:
    """Malformed frames at the reference broker, the same frames through the chaos proxy, kill -9
    cycles under a producer and a committing consumer group, a sustained stream through the
    proxy against the same stream direct, waves of idle producer ids that must expire, then
    leader kill cycles on each real Kafka cluster under the same producer and group."""
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
        if proxy_frames:
            params = MalformedParams(
                proxy_frames, seed=seed, workers=workers, timeout_s=timeout_s,
                max_seconds=proxy_frames_max_seconds, via_proxy=True,
            )  # fmt: skip
            results["malformed_via_proxy"] = run_malformed(params, Path(work))
        if cycles:
            crash = CrashParams(cycles, seed=seed, max_seconds=cycles_max_seconds)
            results["crash_cycles"] = run_crash_cycles(crash, Path(work))
        if load_mib:
            results["load"] = run_load(LoadParams(load_mib, seed=seed), Path(work))
        if producer_ids:
            ids = ProducerIdParams(producer_ids, expiration_ms=producer_id_expiration_ms)
            results["producer_ids"] = run_producer_ids(ids, Path(work))
        if kafka_cycles:
            kafka = KafkaCycleParams(kafka_cycles, seed=seed, port_offset=kafka_port_offset)
            results["kafka_cycles"] = run_kafka_cycles(kafka, Path(work))
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
