"""The checker as a spark-submit job: one description for the DAGs' SparkSubmitOperator, the
tests and a user's own spark-submit.

Under spark-submit the JVM is up before Python runs, so ``spark.jars`` set by the session
builder no longer reaches the driver's class path: the connectors (Spark's Kafka source, the
sink's JDBC drivers) must come with ``--jars`` (and the driver's memory with
``--driver-memory``).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eoslab.settings import HOST, project_root
from eoslab.verify.spark_session import (
    APP_NAME,
    DEFAULT_MASTER,
    DRIVER_MEMORY,
    SESSION_CONF,
    checker_jars,
)


def python_env() -> dict[str, str]:
    """The driver and executors run this virtualenv's Python."""
    return {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}


@dataclass(frozen=True)
class SparkJob:
    """spark-submit's arguments for one checker run; ``application_args`` may hold an Airflow
    template or XCom reference (the run directory is known only when the DAG runs)."""

    application_args: list[Any]
    application: Path = field(
        default_factory=lambda: project_root() / "spark_jobs" / "verify_run.py"
    )
    jars: list[str] = field(default_factory=checker_jars)
    conf: dict[str, str] = field(default_factory=lambda: dict(SESSION_CONF))
    driver_memory: str = DRIVER_MEMORY
    env: dict[str, str] = field(default_factory=python_env)
    name: str = APP_NAME

    def command(self, master: str = DEFAULT_MASTER) -> list[str]:
        """``spark-submit --master M --driver-memory 4g --jars ... --conf ... verify_run.py ARGS``
        with this virtualenv's spark-submit."""
        spark_home = _spark_home()
        conf = [arg for key, value in self.conf.items() for arg in ("--conf", f"{key}={value}")]
        return [
            str(spark_home / "bin" / "spark-submit"),
            "--master",
            master,
            "--name",
            self.name,
            "--driver-memory",
            self.driver_memory,
            "--jars",
            ",".join(self.jars),
            *conf,
            str(self.application),
            *map(str, self.application_args),
        ]

    def environment(self) -> dict[str, str]:
        """The environment for :meth:`command`: this pyspark, this Python, loopback."""
        return {**os.environ, **self.env, "SPARK_HOME": str(_spark_home()), "SPARK_LOCAL_IP": HOST}


def _spark_home() -> Path:
    """The pyspark of this virtualenv, which carries spark-submit (imported late: the DAG files
    import this module, and their parsing should not load Spark)."""
    import pyspark

    return Path(pyspark.__file__).parent


def checker_job(run_dir: Any, bootstrap: str | None = None) -> SparkJob:
    """The checker's job for one run directory (``bootstrap``: read the topic elsewhere)."""
    return SparkJob([run_dir, *(["--bootstrap", bootstrap] if bootstrap else [])])
