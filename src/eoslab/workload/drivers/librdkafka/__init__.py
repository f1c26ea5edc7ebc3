"""librdkafka (confluent-kafka) as a workload driver: the roles' own client, in the session's
process. The workload's own release is the virtualenv's; another one (to show a client bug
where it exists and its absence where it was fixed, librdkafka #3584: fixed in 2.3.0) is
confluent-kafka at that version (its wheel bundles the matching librdkafka), installed into
``.venv-clients/confluent-kafka-<v>/`` (``pip install --target``; the ones scenarios name by
``make setup``, any other release with a wheel for this Python on first use) and put first on
the session process' ``PYTHONPATH``: the roles are the same code, only ``import confluent_kafka``
finds the other release.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import confluent_kafka

from eoslab.clients import LIBRDKAFKA, ClientLaunch, ClientRef
from eoslab.workload.drivers.build import Build, clients_dir

OLDER_CLIENTS: dict[str, str] = {"2.2.0": "confluent-kafka==2.2.0"}
"""librdkafka versions scenarios name -> the pinned package ``make setup`` installs (any other
release is installed on first use)."""


def own_version() -> str:
    """The workload's own librdkafka version."""
    return str(confluent_kafka.libversion()[0])


def installable() -> list[str]:
    """The librdkafka releases the lab runs: its own and the older ones ``make setup`` installs."""
    return [own_version(), *OLDER_CLIENTS]


def prepare(version: str, say: Callable[[str], None]) -> ClientLaunch:
    """librdkafka ``version``: the workload's own, or confluent-kafka at that version, installed
    on first use (one line said; ClientError when PyPI has no wheel of it for this Python)."""
    if version == own_version():
        return ClientLaunch(family="librdkafka", version=version)
    path = clients_dir() / ClientRef(LIBRDKAFKA, version).folder
    if not (path / "confluent_kafka").is_dir():
        Build(path, inputs=None, what=f"confluent-kafka {version} (librdkafka {version})").ensure(
            lambda: [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--target",
                str(path),
                f"confluent-kafka=={version}",
            ],
            say,
            lambda _: (
                f"librdkafka:{version}: PyPI has no confluent-kafka {version} wheel for this "
                "Python (or PyPI is not reachable)"
            ),
        )
    return ClientLaunch(family="librdkafka", version=version, python_path=str(path))
