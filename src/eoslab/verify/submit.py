"""How to run the checker's job under spark-submit (for the DAGs, the tests and by hand).

Under spark-submit the JVM is up before Python runs, so ``spark.jars`` set by the session
builder no longer reaches the driver's class path: the Kafka connector must come with
``--jars`` (and the driver's memory with ``--driver-memory``). The command line and environment
built here carry them, and point spark-submit at the pyspark of this virtualenv.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyspark

from eoslab.paths import project_root
from eoslab.verify.spark_session import DEFAULT_MASTER, DRIVER_MEMORY, kafka_jars


def verify_job() -> Path:
    return project_root() / "spark_jobs" / "verify_run.py"


def spark_submit_command(
    run_dir: Path, master: str = DEFAULT_MASTER, bootstrap: str | None = None
) -> list[str]:
    """``spark-submit --master M --driver-memory 4g --jars <Kafka connector> spark_jobs/verify_run.py
    RUN_DIR``."""
    spark_home = Path(pyspark.__file__).parent
    command = [
        str(spark_home / "bin" / "spark-submit"),
        "--master",
        master,
        "--driver-memory",
        DRIVER_MEMORY,
        "--jars",
        ",".join(kafka_jars()),
        str(verify_job()),
        str(run_dir),
    ]
    return command + (["--bootstrap", bootstrap] if bootstrap else [])


def spark_submit_env() -> dict[str, str]:
    """The environment for :func:`spark_submit_command`: this pyspark, this Python."""
    return {
        **os.environ,
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
