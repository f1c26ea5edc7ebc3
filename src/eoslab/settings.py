"""Every EOSLAB_* setting, the checkout's folders and the lab's base ports, defined here once.

Settings are read from the environment when asked for, not at import: a test or an Airflow
task sets them for the lab it talks to. Everything else imports them from this module.

=========================  ==============================================================
variable                   meaning
=========================  ==============================================================
EOSLAB_HOME                the checkout (default: found from the current directory)
EOSLAB_LAB_DIR             the lab's state folder (default: ``.lab/`` in the checkout)
EOSLAB_PORT_OFFSET         added to every base port, for a second lab beside the first
EOSLAB_TARGETS             the targets ``eoslab lab up`` brings up, comma-separated (default:
                           every lab target: ``kafka,kafka4,refbroker``)
EOSLAB_CLIENTS             the clients a matrix runs (``make lab CLIENTS=...``), comma-separated:
                           ``java:3.9.2``, a family (``java``), ``librdkafka`` (the workload's
                           own); default: every client of the matrix
EOSLAB_WITH_AIRFLOW        ``0`` leaves Airflow out of ``eoslab lab up``
EOSLAB_WITH_POSTGRES       ``0`` leaves the consumers' PostgreSQL out of ``eoslab lab up``
EOSLAB_WITH_SPARK_CONNECT  ``0`` leaves the warm Spark (Spark Connect) out of ``eoslab lab up``
EOSLAB_SPARK_REMOTE        the checker's Spark Connect server (``sc://host:port``) when it is
                           not the lab's: a cluster's
EOSLAB_RUNTIME             ``local`` (default) or ``compose``
EOSLAB_RUNS_DIR            where run directories go (default: ``runs/`` in the checkout)
EOSLAB_REPORTS_DIR         where reports go (default: ``reports/`` in the checkout)
EOSLAB_LAB_MEMBER          set by the runtime in its services' environment only: finds strays
=========================  ==============================================================
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

HOST = "127.0.0.1"
"""Every lab server binds loopback unless a user says otherwise."""

HOME = "EOSLAB_HOME"
LAB_DIR = "EOSLAB_LAB_DIR"
PORT_OFFSET = "EOSLAB_PORT_OFFSET"
TARGETS = "EOSLAB_TARGETS"
CLIENTS = "EOSLAB_CLIENTS"
WITH_AIRFLOW = "EOSLAB_WITH_AIRFLOW"
WITH_POSTGRES = "EOSLAB_WITH_POSTGRES"
WITH_SPARK_CONNECT = "EOSLAB_WITH_SPARK_CONNECT"
SPARK_REMOTE = "EOSLAB_SPARK_REMOTE"
RUNTIME = "EOSLAB_RUNTIME"
RUNS_DIR = "EOSLAB_RUNS_DIR"
REPORTS_DIR = "EOSLAB_REPORTS_DIR"
LAB_MEMBER = "EOSLAB_LAB_MEMBER"

RUNTIMES = ("local", "compose")


class BasePort(IntEnum):
    """The documented ports (ARCHITECTURE.md, "Defaults"); a lab adds its port offset.

    Kafka's ports are per broker: the base plus the broker id (9091, 9092, 9093, ...); so are
    Kafka 4's, per node (9291, 9292, 9293).
    """

    ZOOKEEPER = 2181
    KAFKA = 9090
    """What clients reach: the chaos proxy in front of broker i listens on 9090 + i."""
    KAFKA_CLIENT = 29090
    """Broker i's own client listener (behind the proxy)."""
    KAFKA_INTERNAL = 19090
    """Broker i's inter-broker listener (no proxy)."""
    KAFKA_DIRECT = 39090
    """Broker i's optional listener around the proxy (benchmarks, checks of the log)."""
    KAFKA4 = 9290
    """What clients reach: the chaos proxy in front of Kafka 4 node i listens on 9290 + i."""
    KAFKA4_CLIENT = 29290
    """Kafka 4 node i's own client listener (behind the proxy)."""
    KAFKA4_INTERNAL = 19290
    """Kafka 4 node i's inter-broker listener (no proxy)."""
    KAFKA4_CONTROLLER = 19390
    """Kafka 4 node i's KRaft controller listener (the metadata quorum; no proxy)."""
    REFBROKER = 9192
    """What clients reach: the proxy in front of the reference broker."""
    REFBROKER_CLIENT = 29192
    REFBROKER_CONTROL = 9199
    PROXY_CONTROL = 8474
    AIRFLOW = 8080
    POSTGRES = 5433
    """The consumers' PostgreSQL sink (5432 is left to a PostgreSQL the machine may run)."""
    SPARK_CONNECT = 15002
    """The lab's warm Spark: Spark Connect's own default port."""
    SPARK_MASTER = 7077
    """A standalone Spark cluster's master (`eoslab lab spark-cluster`), Spark's default."""
    SPARK_MASTER_UI = 8090


@dataclass(frozen=True)
class HostPort:
    """A listen or upstream address, as command lines take it."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> HostPort:
        """'127.0.0.1:9192' -> HostPort; the port is required, an IPv6 host goes in brackets.
        Raises ValueError naming the text."""
        host, sep, port = text.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"expected HOST:PORT, got {text!r}")
        return cls(host.strip("[]"), int(port))

    @classmethod
    def local(cls, port: int) -> HostPort:
        return cls(HOST, port)

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def project_root() -> Path:
    """The eoslab checkout: $EOSLAB_HOME, else the nearest parent of the cwd or of this file
    that holds `services/kafka/pom.xml` (the package is installed editable from the checkout)."""
    if home := os.environ.get(HOME):
        return Path(home).resolve()
    for start in (Path.cwd(), Path(__file__).resolve()):
        for candidate in (start, *start.parents):
            if (candidate / "services" / "kafka" / "pom.xml").is_file():
                return candidate
    raise FileNotFoundError(
        "cannot find the eoslab checkout (no services/kafka/pom.xml above the current "
        f"directory); run from the checkout or set {HOME}"
    )


def kafka_lib() -> Path:
    """The Kafka 3.9 broker jars fetched by `make setup`."""
    return project_root() / "services" / "kafka" / "lib"


def kafka4_lib() -> Path:
    """The Kafka 4 (KRaft) node jars fetched by `make setup`."""
    return project_root() / "services" / "kafka4" / "lib"


def spark_jars() -> Path:
    """The checker's connectors (Spark's Kafka source, the sink's JDBC drivers) and their
    dependencies, fetched by `make setup`."""
    return project_root() / "services" / "spark" / "jars"


def lab_dir() -> Path:
    """The lab's state folder: $EOSLAB_LAB_DIR, else `.lab/` in the checkout."""
    if configured := os.environ.get(LAB_DIR):
        return Path(configured).resolve()
    return project_root() / ".lab"


def runs_root() -> Path:
    """Where run directories go: $EOSLAB_RUNS_DIR, else `runs/` in the checkout."""
    configured = os.environ.get(RUNS_DIR)
    return Path(configured) if configured else project_root() / "runs"


def reports_root() -> Path:
    """Where reports go: $EOSLAB_REPORTS_DIR, else `reports/` in the checkout."""
    configured = os.environ.get(REPORTS_DIR)
    return Path(configured) if configured else project_root() / "reports"


def port_offset() -> int:
    return int(os.environ.get(PORT_OFFSET, "0"))


def lab_targets() -> tuple[str, ...] | None:
    """$EOSLAB_TARGETS as names (checked by the runtime's topology), or None when unset."""
    configured = os.environ.get(TARGETS, "").strip()
    if not configured:
        return None
    return tuple(name.strip() for name in configured.split(",") if name.strip())


def with_airflow() -> bool:
    return os.environ.get(WITH_AIRFLOW, "1") != "0"


def with_postgres() -> bool:
    return os.environ.get(WITH_POSTGRES, "1") != "0"


def with_spark_connect() -> bool:
    return os.environ.get(WITH_SPARK_CONNECT, "1") != "0"


def spark_remote() -> str | None:
    return os.environ.get(SPARK_REMOTE) or None


def runtime_name() -> str:
    return os.environ.get(RUNTIME, "local")


def matrix_clients() -> list[str]:
    """$EOSLAB_CLIENTS as a list (empty: every client of the matrix)."""
    return [name.strip() for name in os.environ.get(CLIENTS, "").split(",") if name.strip()]
