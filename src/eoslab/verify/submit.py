"""The checker as a spark-submit job, for a Spark cluster without Spark Connect: one
description for the tests and a user's own spark-submit (the lab checks through its warm
Spark instead).

Under spark-submit the JVM is up before Python runs, so ``spark.jars`` set by the session
builder no longer reaches the driver's class path: the connectors (Spark's Kafka source, the
sink's JDBC drivers) must come with ``--jars`` (and the driver's memory with
``--driver-memory``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eoslab.runtime.spark import (
    APP_NAME,
    CONNECT_MODE_VARIABLES,
    DEFAULT_MASTER,
    DRIVER_MEMORY,
    SESSION_CONF,
    checker_jars,
    python_env,
    spark_environment,
    spark_submit,
)
from eoslab.settings import project_root


@dataclass(frozen=True)
class SparkJob:
    """spark-submit's arguments for one checker run: the run directory and the checker's
    options (``spark_jobs/verify_run.py --help``)."""

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
        """``spark-submit --master M ... verify_run.py ARGS`` with this virtualenv's
        spark-submit."""
        return spark_submit(
            str(self.application),
            *map(str, self.application_args),
            name=self.name,
            master=master,
            jars=self.jars,
            conf=self.conf,
            driver_memory=self.driver_memory,
        )

    def environment(self) -> dict[str, str]:
        """The environment for :meth:`command`: this pyspark, this Python, loopback; not the
        Spark Connect mode pyspark marks a process with once it opened a Connect session (the
        job's PySpark would then look for a server instead of driving its JVM)."""
        inherited = {k: v for k, v in os.environ.items() if k not in CONNECT_MODE_VARIABLES}
        return {**inherited, **spark_environment(), **self.env}


def checker_job(run_dir: Any, bootstrap: str | None = None) -> SparkJob:
    """The checker's job for one run directory (``bootstrap``: read the topic elsewhere)."""
    return SparkJob([run_dir, *(["--bootstrap", bootstrap] if bootstrap else [])])
