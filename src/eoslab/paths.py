"""Where the lab finds its files: the checkout (jars, configs) and its state folder."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The eoslab checkout: $EOSLAB_HOME, else the nearest parent of the cwd or of this file
    that holds `services/kafka/pom.xml` (the package is installed editable from the checkout)."""
    if home := os.environ.get("EOSLAB_HOME"):
        return Path(home).resolve()
    for start in (Path.cwd(), Path(__file__).resolve()):
        for candidate in (start, *start.parents):
            if (candidate / "services" / "kafka" / "pom.xml").is_file():
                return candidate
    raise FileNotFoundError(
        "cannot find the eoslab checkout (no services/kafka/pom.xml above the current "
        "directory); run from the checkout or set EOSLAB_HOME"
    )


def kafka_lib() -> Path:
    """The Kafka 3.9 broker jars fetched by `make setup`."""
    return project_root() / "services" / "kafka" / "lib"


def spark_jars() -> Path:
    """Spark's Kafka connector and its dependencies fetched by `make setup`."""
    return project_root() / "services" / "spark" / "jars"


def lab_dir() -> Path:
    """The lab's state folder: $EOSLAB_LAB_DIR, else `.lab/` in the checkout."""
    if configured := os.environ.get("EOSLAB_LAB_DIR"):
        return Path(configured).resolve()
    return project_root() / ".lab"
