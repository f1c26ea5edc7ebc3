"""The warm Spark's warm-up: one check of a small clean run as soon as the lab is up, so that
the first real check does not pay for the server's class loading and JIT (a cold server's first
check of 3,000 records took ~30 s here, the next ones ~12 s).

``eoslab lab up`` starts it in the background (``python -m eoslab.orchestration.warmup``, its
output in the lab's ``spark-warmup.log``); it is bounded by :data:`WARMUP_TIMEOUT_S` and leaves
nothing behind: the run directory is temporary and its topic is deleted. It lives here, above
the checker, because it runs the workload as well (a generated run) before checking it.
"""

from __future__ import annotations

import math
import signal
import sys
import tempfile
import time
from pathlib import Path

from eoslab.admin import delete_topic
from eoslab.rundir import Verdict
from eoslab.runtime.topology import LabConfig
from eoslab.verify.checker import verify_run
from eoslab.workload.synthetic import generate

WARMUP_RECORDS = 3000
WARMUP_TIMEOUT_S = 300.0


class WarmupError(RuntimeError):
    """The warm-up check did not find its clean run conforming."""


def warm_up(bootstrap: str, remote: str, records: int = WARMUP_RECORDS) -> Verdict:
    """Check a freshly generated clean run of ``records`` on the Spark Connect server
    ``remote``; the run's topic on ``bootstrap`` is deleted afterwards."""
    with tempfile.TemporaryDirectory(prefix="eoslab-warmup-") as root:
        run_dir, _ = generate(bootstrap, Path(root), records, name="warm-up")
        try:
            verdict = verify_run(run_dir.path, remote=remote)
        finally:
            delete_topic(bootstrap, run_dir.read_info().topic)
    if not verdict.conforms:
        failed = ", ".join(check.name for check in verdict.mismatches)
        raise WarmupError(f"a clean run does not conform: {failed}")
    return verdict


def main() -> int:
    signal.alarm(math.ceil(WARMUP_TIMEOUT_S))
    config = LabConfig()
    started = time.perf_counter()
    try:
        warm_up(config.bootstrap_servers, config.spark_remote)
    except Exception as error:  # the log is the only place anyone will see it
        print(f"warm-up failed: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        return 1
    seconds = time.perf_counter() - started
    print(f"warm-up: {config.spark_remote} checked a clean run in {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
