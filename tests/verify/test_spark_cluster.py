"""The checker on a real multi-process Spark cluster (a standalone master and two workers, the
pinned Spark's own launcher, on loopback): `eoslab verify --master spark://...` gives the same
checks and the same anomaly rows as the lab's warm Spark."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from planted_runs import PLANTED_EXPECTED, plant_anomalies, rows
from pyspark.sql import SparkSession

from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.spark import CONNECT_MODE_VARIABLES
from eoslab.runtime.spark_cluster import StandaloneCluster
from eoslab.settings import BasePort
from eoslab.verify.checker import verify_run

pytestmark = pytest.mark.lab


def test_a_check_on_a_standalone_cluster_equals_the_warm_sparks(
    lab: LocalRuntime, spark: SparkSession, kafka_bootstrap: str, tmp_path: Path
) -> None:
    run, _ = plant_anomalies(tmp_path / "runs", kafka_bootstrap)
    run_dir, _ = run.write(expected=PLANTED_EXPECTED)
    warm = verify_run(run_dir.path, spark=spark)
    tables = {name: rows(run_dir, name) for name in warm.links.anomalies}
    assert tables["duplicate"]

    cluster = StandaloneCluster(
        tmp_path / "cluster",
        master_port=lab.config.port(BasePort.SPARK_MASTER),
        ui_port=lab.config.port(BasePort.SPARK_MASTER_UI),
    )
    with cluster:
        assert cluster.alive_workers() == 2
        env = {k: v for k, v in os.environ.items() if k not in CONNECT_MODE_VARIABLES}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "eoslab.cli",
                "verify",
                str(run_dir.path),
                "--master",
                cluster.url,
            ],
            env={**env, "EOSLAB_SPARK_REMOTE": ""},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        executors = list((tmp_path / "cluster").glob("worker-*/app-*/*"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert f"checking on a Spark of its own ({cluster.url})" in done.stdout
    assert len(executors) == 2, "one executor on each worker"  # the work ran there
    again = run_dir.read_verdict()
    assert again.checks == warm.checks
    assert {name: rows(run_dir, name) for name in again.links.anomalies} == tables
