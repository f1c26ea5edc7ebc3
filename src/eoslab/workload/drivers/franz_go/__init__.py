"""franz-go (``github.com/twmb/franz-go``, any module version on the Go module proxy) as a
workload driver: the Go program in ``services/clients/franz-go/``, built with ``go`` once per
module version into ``.venv-clients/franz-go-<version>/`` (its ``build.sh``: the module at that
version, its own dependencies as its go.mod pins them), rebuilt when its sources change.
franz-go's errors reach the roles as librdkafka's (``services/clients/franz-go/failure.go``
lists the mapping); its configuration is librdkafka's, translated into kgo options
(:mod:`eoslab.workload.drivers.franz_go.config`).

A transactional copier (consume-transform-produce) runs on one ``kgo.GroupTransactSession``
shared by its consumer and its producer: franz-go commits a transaction's offsets only that way
(``services/clients/franz-go/producer.go`` says how the protocol's calls map onto it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from eoslab.clients import ClientError, ClientLaunch, ClientRef
from eoslab.settings import project_root
from eoslab.workload.drivers.build import Build, clients_dir

MODULE = "github.com/twmb/franz-go"
BINARY = "eoslab-franz-go"
LOOKUP_TIMEOUT_S = 60.0
MISSING = (
    r"not available|unknown revision|invalid version|no matching versions|404 Not Found|"
    r"410 Gone|dial tcp|no such host"
)
"""go's words for a module version the proxy does not have (or a proxy it cannot reach)."""
KIP848_SINCE = (1, 22, 0)
"""franz-go's KIP-848 consumer group (kgo.ServerSideBalancer) exists from this version on: the
driver is built with ``-tags kip848`` for it (older versions refuse group.protocol=consumer)."""


def sources() -> Path:
    return project_root() / "services" / "clients" / "franz-go"


def module_version(version: str) -> str:
    """The Go module version a client's version names (``1.22.2`` and ``v1.22.2`` alike)."""
    return version if version.startswith("v") else f"v{version}"


def build_tags(version: str) -> str:
    """The build tags the driver needs for ``version`` (a ``vX.Y.Z[-pre]`` module version)."""
    numbers = re.match(r"v(\d+)\.(\d+)\.(\d+)", version)
    if numbers is None:
        return ""
    release = tuple(int(n) for n in numbers.groups())
    return "kip848" if release >= KIP848_SINCE else ""


def prepare(version: str, say: Callable[[str], None]) -> ClientLaunch:
    """The franz-go driver for module ``version``, built if it is not yet (one line said)."""
    module = module_version(version)
    folder = clients_dir() / ClientRef("franz-go", module).folder
    build = Build(folder, inputs=sources(), what=f"the franz-go driver for {MODULE} {module}")
    if not build.fresh:
        if shutil.which("go") is None:
            raise ClientError(f"franz-go:{version}: building the franz-go driver needs go on PATH")
        check_published(version, module)
    build.ensure(
        lambda: ["sh", str(sources() / "build.sh"), module, str(folder), build_tags(module)],
        say,
        lambda output: failure_line(version, module, output),
    )
    return ClientLaunch(family="franz-go", version=version, command=(str(folder / BINARY),))


def check_published(version: str, module: str) -> None:
    """ClientError (one line) unless the Go module proxy has ``module`` (before a build starts:
    one look-up of the version asked for)."""
    done = subprocess.run(
        ["go", "list", "-m", f"{MODULE}@{module}"],
        capture_output=True,
        text=True,
        timeout=LOOKUP_TIMEOUT_S,
        env={**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"},
        cwd=tempfile.gettempdir(),
        check=False,
    )
    if done.returncode != 0:
        raise ClientError(failure_line(version, module, done.stderr))


def failure_line(version: str, module: str, output: str) -> str:
    """go's failure as one line: the version missing from the proxy, or what broke."""
    if f"{MODULE}@{module}" in output and re.search(MISSING, output):
        return (
            f"franz-go:{version}: {MODULE} {module} is not on the Go module proxy "
            "(or the proxy is not reachable)"
        )
    errors = [line for line in output.splitlines() if re.match(r"^\S+\.go:\d+:\d+: ", line)]
    if errors:
        return f"franz-go:{version}: the driver does not compile against {module}: {errors[0]}"
    lines = [line for line in output.splitlines() if line.strip()]
    return (
        f"franz-go:{version}: go could not build the driver: {lines[-1] if lines else 'no output'}"
    )
