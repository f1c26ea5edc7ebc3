"""Kafka's Java client (``org.apache.kafka:kafka-clients``, any release on Maven Central) as a
workload driver: the program in ``services/clients/java/`` (see its pom), built with Maven once
per client version into ``.venv-clients/java-<version>/`` (its classes and the client's jars),
rebuilt when its sources change. The Java client's exceptions reach the roles as librdkafka's
errors (``services/clients/java/.../Failure.java`` lists the mapping); its configuration is
librdkafka's, translated (:mod:`eoslab.workload.drivers.java.config`).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

from eoslab.clients import ClientError, ClientLaunch, ClientRef
from eoslab.settings import project_root
from eoslab.workload.drivers.build import Build, clients_dir

MAIN_CLASS = "eoslab.driver.Driver"
JVM_OPTIONS = ("-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
"""One JVM per session: a small heap and the serial collector keep a run of many sessions light;
and only the quick compiler (C1): a session is over before C2's code would pay for compiling it.
Measured on 200,000 records sent through the driver after 20,000 (2026-12-06): with C2 the
driver's process took 15.2 µs of CPU a record, 1.84 of its 3.04 s in the compiler threads, and
sent 59,000 records/s; with C1 only, 6.0 µs a record (0.16 s compiling), 95,000 records/s."""


def sources() -> Path:
    return project_root() / "services" / "clients" / "java"


def prepare(version: str, say: Callable[[str], None]) -> ClientLaunch:
    """The Java driver for kafka-clients ``version``, built if it is not yet (one line said)."""
    folder = clients_dir() / ClientRef("java", version).folder
    build = Build(folder, inputs=sources(), what=f"the Java driver for kafka-clients {version}")
    needs = ("java",) if build.fresh else ("java", "mvn")
    missing = [tool for tool in needs if shutil.which(tool) is None]
    if missing:
        raise ClientError(f"java:{version}: the Java driver needs {' and '.join(missing)} on PATH")
    build.ensure(lambda: _maven(version, folder), say, lambda output: failure_line(version, output))
    classpath = f"{folder / 'classes'}:{folder / 'lib'}/*"
    return ClientLaunch(
        family="java",
        version=version,
        command=("java", *JVM_OPTIONS, "-cp", classpath, MAIN_CLASS),
    )


def _maven(version: str, folder: Path) -> list[str]:
    pom = sources() / "pom.xml"
    settings = project_root() / "services" / "maven-settings.xml"
    return [
        "mvn", "-q", "-B", "--no-transfer-progress", "-Dstyle.color=never",
        "-s", str(settings), "-f", str(pom),
        f"-Dkafka.version={version}", f"-Ddriver.dir={folder}",
        "compile", "dependency:copy-dependencies",
    ]  # fmt: skip


def failure_line(version: str, output: str) -> str:
    """Maven's failure as one line: the version missing from the registry, or what broke."""
    clean = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", output)
    if re.search(rf"kafka-clients:jar:{re.escape(version)}\b", clean) or (
        "Could not resolve dependencies" in clean and version in clean
    ):
        return (
            f"java:{version}: org.apache.kafka:kafka-clients {version} is not on Maven Central "
            "(or Maven Central is not reachable)"
        )
    errors = [line for line in clean.splitlines() if line.startswith("[ERROR]") and ".java" in line]
    if errors:
        return f"java:{version}: the driver does not compile against kafka-clients {version}: {errors[0]}"
    lines = [line for line in clean.splitlines() if line.strip()]
    return (
        f"java:{version}: Maven could not build the driver: {lines[-1] if lines else 'no output'}"
    )
