"""Which librdkafka the producers run: the workload's own (confluent-kafka of the virtualenv),
or an older release a scenario names to show a client bug where it exists and its absence
where it was fixed (librdkafka #3584: fixed in 2.3.0).

An older client is confluent-kafka at that version (its wheel bundles the matching librdkafka),
installed by ``make setup`` into a folder of its own, ``.venv-clients/confluent-kafka-<v>/``
(``pip install --target``), and put first on the producer process' ``PYTHONPATH``: the producer
is the same code, only ``import confluent_kafka`` finds the older release.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka

from eoslab.settings import project_root

OLDER_CLIENTS: dict[str, str] = {"2.2.0": "confluent-kafka==2.2.0"}
"""librdkafka versions a scenario may name -> the pinned package ``make setup`` installs."""
CLIENTS_DIR = ".venv-clients"


class ClientError(RuntimeError):
    """A client version that is not known or not installed (the message names the fix)."""


@dataclass(frozen=True)
class ProducerClient:
    version: str
    path: Path

    def environment(self) -> dict[str, str]:
        """The producer process' environment: this client's package first on the path."""
        paths = [str(self.path), *filter(None, [os.environ.get("PYTHONPATH")])]
        return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def own_version() -> str:
    """The workload's own librdkafka version."""
    return str(confluent_kafka.libversion()[0])


def client_version(version: str | None) -> str:
    """The librdkafka version the producers run: ``version``, else the workload's own."""
    return version or own_version()


def clients_dir() -> Path:
    return project_root() / CLIENTS_DIR


def producer_client(version: str | None) -> ProducerClient | None:
    """The older client ``version`` (None: the workload's own, which needs nothing)."""
    if version is None:
        return None
    if version not in OLDER_CLIENTS:
        known = ", ".join(OLDER_CLIENTS)
        raise ClientError(f"unknown client librdkafka {version}; known older clients: {known}")
    path = clients_dir() / f"confluent-kafka-{version}"
    if not (path / "confluent_kafka").is_dir():
        raise ClientError(
            f"librdkafka {version} is not installed in {path}; run `make setup` (it installs "
            f"{OLDER_CLIENTS[version]} there)"
        )
    return ProducerClient(version, path)
