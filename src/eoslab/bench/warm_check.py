"""One cell's check on the lab's warm Spark against the same check paying its own Spark.

A clean run of :data:`RECORDS` records (the default matrix's size) is checked: ``cold_s`` by
the spark-submit job (a JVM and a SparkSession of its own, as every cell paid before the lab
had its warm Spark), ``warm_s`` as the lab checks now, a Spark Connect client of the warm
Spark (the median of :data:`WARM_REPEATS`, after one to warm the server's code paths), each
reading the topic as a cell's first check does; ``recheck_s`` checks the run again from the
copy of its log the run directory keeps, after its topic is deleted. Target: ``warm_s`` at most
:data:`TARGET_WARM_S`.
"""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from eoslab.admin import delete_topic
from eoslab.runtime.local import LocalRuntime
from eoslab.verify.checker import verify_run
from eoslab.verify.submit import checker_job
from eoslab.workload.synthetic import generate

RECORDS = 3_000
WARM_REPEATS = 3
TARGET_WARM_S = 10.0


def run(lab: LocalRuntime, records: int = RECORDS) -> dict[str, Any]:
    remote = lab.config.spark_remote
    with tempfile.TemporaryDirectory(prefix="eoslab-bench-warm-") as root:
        run_dir, _ = generate(lab.config.bootstrap_servers, Path(root), records)
        job = checker_job(run_dir.path)
        started = time.perf_counter()
        cold = subprocess.run(
            job.command(), env=job.environment(), capture_output=True, text=True, check=False
        )
        cold_s = time.perf_counter() - started
        if cold.returncode != 0:
            raise RuntimeError(f"the cold check failed: {cold.stderr[-2000:]}")
        verify_run(run_dir.path, remote=remote)  # the server's first check of this bench
        warm = []
        for _ in range(WARM_REPEATS):
            started = time.perf_counter()
            verdict = verify_run(run_dir.path, remote=remote, from_topic=True)
            warm.append(time.perf_counter() - started)
        delete_topic(lab.config.bootstrap_servers, run_dir.read_info().topic)
        if not verdict.conforms:
            raise RuntimeError(f"the warm check finds a clean run not conforming: {verdict}")
        started = time.perf_counter()
        recheck = verify_run(run_dir.path, remote=remote)
        recheck_s = time.perf_counter() - started
        if recheck.checks != verdict.checks:
            raise RuntimeError("the re-check from the run directory's copy differs")
    warm_s = statistics.median(warm)
    return {
        "records": records,
        "spark_connect": remote,
        "cold_s": round(cold_s, 2),
        "warm_s": round(warm_s, 2),
        "warm_runs_s": [round(s, 2) for s in warm],
        "recheck_s": round(recheck_s, 2),
        "cold_over_warm": round(cold_s / warm_s, 2),
        "target": {"warm_s": TARGET_WARM_S, "met": warm_s <= TARGET_WARM_S},
    }
