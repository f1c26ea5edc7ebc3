"""librdkafka (confluent-kafka) as a workload driver: the roles' own client, in the session's
process. The workload's own release is the virtualenv's; an older one a scenario names (to show
a client bug where it exists and its absence where it was fixed, librdkafka #3584: fixed in
2.3.0) is confluent-kafka at that version (its wheel bundles the matching librdkafka), installed
by ``make setup`` into ``.venv-clients/confluent-kafka-<v>/`` (``pip install --target``) and put
first on the session process' ``PYTHONPATH``: the roles are the same code, only ``import
confluent_kafka`` finds the older release.
"""

from __future__ import annotations

import confluent_kafka

from eoslab.clients import ClientError, ClientLaunch
from eoslab.workload.drivers.build import clients_dir

OLDER_CLIENTS: dict[str, str] = {"2.2.0": "confluent-kafka==2.2.0"}
"""librdkafka versions a scenario may name -> the pinned package ``make setup`` installs."""


def own_version() -> str:
    """The workload's own librdkafka version."""
    return str(confluent_kafka.libversion()[0])


def installable() -> list[str]:
    """The librdkafka releases the lab runs: its own and the older ones ``make setup`` installs."""
    return [own_version(), *OLDER_CLIENTS]


def prepare(version: str) -> ClientLaunch:
    """librdkafka ``version``: the workload's own, or an older release ``make setup`` installed."""
    if version == own_version():
        return ClientLaunch(family="librdkafka", version=version)
    if version not in OLDER_CLIENTS:
        known = ", ".join(installable())
        raise ClientError(
            f"librdkafka:{version}: not installed; librdkafka releases the lab has: {known} "
            "(an older one is added to OLDER_CLIENTS in eoslab.workload.drivers.librdkafka and "
            "installed by `make setup`)"
        )
    path = clients_dir() / f"confluent-kafka-{version}"
    if not (path / "confluent_kafka").is_dir():
        raise ClientError(
            f"librdkafka:{version} is not installed in {path}; run `make setup` (it installs "
            f"{OLDER_CLIENTS[version]} there)"
        )
    return ClientLaunch(family="librdkafka", version=version, python_path=str(path))
