"""The compose runtime against the local one: its images built from scratch (the Debian base,
the wheelhouse and every image: what a clean CI machine pays in `make test`) and again with
everything cached (what every `lab up --runtime compose` pays), and `lab up` of the same lab on
either runtime (every target, PostgreSQL and the warm Spark, no Airflow: as `make lab` brings
it up), from a fresh state folder, with the images cached. Issue 33's target: compose ``lab
up`` at most twice the local one's. The default matrix under either runtime is timed beside
``make_lab`` (``make_lab_compose``).
"""

from __future__ import annotations

import time
from pathlib import Path

from eoslab.rundir import LAB_TARGETS
from eoslab.runtime.compose import ComposeRuntime
from eoslab.runtime.engine import engine_client
from eoslab.runtime.images import Builder, lab_images, remove_all
from eoslab.runtime.lab import LabRuntime
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.topology import LabConfig

UP_RATIO_TARGET = 2.0


def _say(line: str) -> None:
    print(line, flush=True)


def timed_build(builder: Builder) -> dict[str, object]:
    began = time.monotonic()
    builder.ensure(lab_images())
    return {
        "seconds": round(time.monotonic() - began, 1),
        "built": dict(builder.seconds),
    }


def timed_up(lab: LabRuntime) -> dict[str, float]:
    """``lab up`` (and ``lab down --purge``) of a lab, in seconds."""
    began = time.monotonic()
    lab.up()
    up = time.monotonic() - began
    began = time.monotonic()
    lab.down(purge=True)
    return {"up_s": round(up, 1), "down_s": round(time.monotonic() - began, 1)}


def run(state_root: Path, port_offset: int, *, from_scratch: bool = True) -> dict[str, object]:
    client = engine_client(_say)
    state_root.chmod(state_root.stat().st_mode | 0o011)  # PostgreSQL's nobody walks through it
    results: dict[str, object] = {}
    if from_scratch:
        remove_all(client, _say)
        results["images_from_scratch"] = timed_build(Builder(client, _say))
    results["images_cached"] = timed_build(Builder(client, _say))

    def config(name: str) -> LabConfig:
        return LabConfig(
            state_dir=state_root / name,
            port_offset=port_offset,
            targets=LAB_TARGETS,
            with_postgres=True,
            with_spark_connect=True,
            with_airflow=False,
        )

    local = timed_up(LocalRuntime(config("local")))
    compose = timed_up(ComposeRuntime(config("compose"), say=_say))
    ratio = round(compose["up_s"] / local["up_s"], 2)
    results["lab_up"] = {
        "local": local,
        "compose": compose,
        "compose_vs_local": ratio,
        "target": {"compose_vs_local": UP_RATIO_TARGET, "met": ratio <= UP_RATIO_TARGET},
    }
    return results
