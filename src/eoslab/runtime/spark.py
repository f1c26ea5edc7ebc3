"""The lab's Spark: one set of settings for every way the checker meets Spark, and the warm
Spark Connect server the lab runs.

The checker reads hundreds to millions of records on a shared 2-core machine: its ledger
shuffle is cut in 16 partitions (at 8M records it built in 68 s against 85 s with 4; adaptive
execution merges them back for small runs, instead of 200 near-empty tasks), and the UI is off
because nobody watches it. The driver binds loopback like every other lab process.

A JVM and a SparkSession cost 15-20 s on 2 cores, more than checking a small run: the lab keeps
one warm Spark, a Spark Connect server (Spark 4 carries it in its own jars), and the checks are
its clients. The server holds the connectors (``--jars``); the clients send plans and need no
JVM of their own.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from eoslab.settings import HOST, BasePort, spark_jars

DEFAULT_MASTER = "local[2]"
SHUFFLE_PARTITIONS = 16
DRIVER_MEMORY = "4g"
"""Local mode runs the executors inside the driver: millions of records are cached there."""
CLEANER_GC_INTERVAL = "5min"
APP_NAME = "eoslab-verify"
CONNECT_APP_NAME = "eoslab-spark-connect"
CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
CONNECT_MODE_VARIABLES = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")
"""How pyspark marks a process as a Spark Connect client (set by the first Connect session, and
read by every ``pyspark.sql.functions`` call): one process is a client or drives a JVM, never
both, and a child must not inherit the mark by accident."""

SQL_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": str(SHUFFLE_PARTITIONS),
    "spark.sql.session.timeZone": "UTC",
}
"""The settings a session may set for itself (a Spark Connect client sends these)."""
SMALL_RUN_RECORDS = 100_000
SMALL_RUN_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
"""What a check of a small run (at most :data:`SMALL_RUN_RECORDS` sends) sets for itself: at a
few thousand records every task, adaptive re-plan and generated class costs more than the rows
(a 3,000-record check on the warm Spark: 14-17 s with the defaults above, 9-10 s with 2
partitions, 8.4 s with neither adaptive execution nor whole-stage code generation). Nor any
generated class at all (``factoryMode``: Spark's interpreted projections and predicates, which
it falls back to when a generated class fails to compile) on one partition: a 1,500-record check
on a warm server took 8-10 s of the server's CPU before, 4-5 s after (2026-11-29, alternated
four times in one session); the first check of each new Spark Connect session (every Airflow
checker task is one) compiled its classes again, 21-94 s of CPU before, 6 s after."""
SESSION_CONF: dict[str, str] = {
    **SQL_CONF,
    "spark.ui.showConsoleProgress": "false",
    "spark.ui.enabled": "false",
    "spark.default.parallelism": str(SHUFFLE_PARTITIONS),
    "spark.driver.host": HOST,
    "spark.driver.bindAddress": HOST,
}
"""Every checker JVM's settings, whether built in process, by spark-submit or as the server."""


def checker_jars() -> list[str]:
    """Every jar the checker needs, fetched by `make setup` (services/spark/pom.xml): Spark's
    Kafka source and the sink's JDBC drivers (SQLite, PostgreSQL), with their dependencies."""
    jars = sorted(str(jar) for jar in spark_jars().glob("*.jar"))
    if not jars:
        raise FileNotFoundError(f"no checker jars in {spark_jars()}; run `make setup`")
    return jars


def spark_home() -> Path:
    """The pyspark of this virtualenv, which carries spark-submit and Spark's jars (imported
    late: the DAG files and the CLI import this module, and should not load Spark for it)."""
    import pyspark

    return Path(pyspark.__file__).parent


def python_env() -> dict[str, str]:
    """The driver and executors run this virtualenv's Python."""
    return {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}


def spark_environment() -> dict[str, str]:
    """What a spark-submit of this lab runs with: this pyspark, this Python, loopback."""
    return {**python_env(), "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": HOST}


def remote_url(host: str, port: int) -> str:
    """A Spark Connect address as clients take it: ``sc://127.0.0.1:15002``."""
    return f"sc://{host}:{port}"


def spark_submit(
    *arguments: str,
    name: str,
    master: str = DEFAULT_MASTER,
    jars: list[str] | None = None,
    conf: dict[str, str] | None = None,
    driver_memory: str = DRIVER_MEMORY,
) -> list[str]:
    """``spark-submit --master M --name N --driver-memory 4g --jars ... --conf ... ARGUMENTS``
    with this virtualenv's spark-submit, the checker's connectors and settings by default."""
    settings = SESSION_CONF if conf is None else conf
    return [
        str(spark_home() / "bin" / "spark-submit"),
        "--master",
        master,
        "--name",
        name,
        "--driver-memory",
        driver_memory,
        "--jars",
        ",".join(checker_jars() if jars is None else jars),
        *(arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")),
        *arguments,
    ]


CHECKS_NICENESS = 10
"""The warm Spark's niceness: in lanes its checks share two cores with other lanes' runs, whose
faults land on time only if their brokers and clients get the CPU first (a check's verdict does
not depend on its pace; `make conformance` of 2026-12-07 at a load of 14: cells invalid for a
crash that met no effect, a drop that met no request)."""


def connect_server_command(port: int, local_dir: Path, master: str = DEFAULT_MASTER) -> list[str]:
    """The lab's Spark Connect server: a driver on ``master`` with the checker's connectors,
    serving gRPC on loopback only, its shuffle and spill files in ``local_dir`` (the lab's),
    at :data:`CHECKS_NICENESS`. A check's snapshots (``localCheckpoint``) outlive its client's
    release of them until the driver's garbage collector lets Spark's cleaner see them go: a
    server that lives for days collects every :data:`CLEANER_GC_INTERVAL` rather than Spark's
    30 minutes."""
    conf = {
        **SESSION_CONF,
        "spark.cleaner.periodicGC.interval": CLEANER_GC_INTERVAL,
        "spark.local.dir": str(local_dir),
        "spark.connect.grpc.binding.address": HOST,
        "spark.connect.grpc.binding.port": str(port),
    }
    submit = spark_submit(
        "--class", CONNECT_SERVER_CLASS, name=CONNECT_APP_NAME, master=master, conf=conf
    )
    # by its path: a container's command is exec'ed without a search of PATH
    return [shutil.which("nice") or "/usr/bin/nice", "-n", str(CHECKS_NICENESS), *submit]


def main(argv: list[str] | None = None) -> None:
    """``python -m eoslab.runtime.spark``: become the warm Spark (compose's spark-connect
    service; the local runtime starts the same command itself)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--port", type=int, default=BasePort.SPARK_CONNECT)
    parser.add_argument("--local-dir", type=Path, default=Path("/tmp/eoslab-spark"))
    args = parser.parse_args(argv)
    args.local_dir.mkdir(parents=True, exist_ok=True)
    command = connect_server_command(args.port, args.local_dir)
    os.execve(command[0], command, {**os.environ, **spark_environment()})


if __name__ == "__main__":
    main()
