"""Two cells' checks on the warm Spark at once against one after the other (issue 35's lanes:
should a run that ends while another lane's check is still on the warm Spark be checked at
once, or wait its turn?).

Two clean runs of :data:`RECORDS` records are checked, each check a Spark Connect session of
its own (as two Airflow tasks' checks would be: their temporary views apart), first one after
the other, then both at once from two threads; :data:`PAIRS` times, after one check of each to
warm the server's code paths. Each concurrent check must reach the verdict its sequential
check reached. ``faster`` names the way that took less time (the median pair); the lanes keep
it.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from eoslab.admin import delete_topic
from eoslab.rundir import Verdict
from eoslab.runtime.local import LocalRuntime
from eoslab.verify.checker import verify_run
from eoslab.workload.synthetic import generate

RECORDS = 3_000
PAIRS = 3


def run(lab: LocalRuntime, records: int = RECORDS) -> dict[str, Any]:
    remote = lab.config.spark_remote
    with tempfile.TemporaryDirectory(prefix="eoslab-bench-at-once-") as root:
        runs = [generate(lab.config.bootstrap_servers, Path(root), records)[0] for _ in range(2)]
        paths = [run_dir.path for run_dir in runs]

        def check(path: Path) -> Verdict:
            return verify_run(path, remote=remote)

        alone = [check(path) for path in paths]  # warms the server; the verdicts to match
        sequential: list[float] = []
        concurrent: list[float] = []
        with ThreadPoolExecutor(max_workers=2) as pool:
            for _ in range(PAIRS):
                started = time.perf_counter()
                for path in paths:
                    check(path)
                sequential.append(time.perf_counter() - started)
                started = time.perf_counter()
                together = list(pool.map(check, paths))
                concurrent.append(time.perf_counter() - started)
                for first, again in zip(alone, together, strict=True):
                    if again.checks != first.checks:
                        raise RuntimeError(
                            f"a check beside another differs from its check alone: {again}"
                        )
        for run_dir in runs:
            delete_topic(lab.config.bootstrap_servers, run_dir.read_info().topic)
    one_after_another_s = statistics.median(sequential)
    two_at_once_s = statistics.median(concurrent)
    return {
        "records": records,
        "one_after_another_s": round(one_after_another_s, 2),
        "two_at_once_s": round(two_at_once_s, 2),
        "one_after_another_runs_s": [round(s, 2) for s in sequential],
        "two_at_once_runs_s": [round(s, 2) for s in concurrent],
        "at_once_over_one_after_another": round(two_at_once_s / one_after_another_s, 2),
        "faster": "two at once" if two_at_once_s < one_after_another_s else "one after another",
    }
