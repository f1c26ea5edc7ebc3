"""Which Kafka client a run's roles use, named once: ``<family>:<version>`` (``librdkafka:2.2.0``,
``java:3.9.2``, ``franz-go:v1.22.2``; a bare version is librdkafka's), and what a session
process needs to run it (:class:`ClientLaunch`, made ready by
:mod:`eoslab.workload.drivers.registry` before a run starts). The drivers themselves are in
:mod:`eoslab.workload.drivers`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

CLIENTS_DIR = ".venv-clients"
"""Where, in the checkout, client drivers are built and other librdkafka releases installed, one
folder each (:meth:`ClientRef.folder`)."""

Family = Literal["librdkafka", "java", "franz-go"]
FAMILIES: tuple[str, ...] = get_args(Family)
LIBRDKAFKA: Family = "librdkafka"


class ClientError(RuntimeError):
    """A client that cannot be had: an unknown family, a version the registry does not have, a
    build that failed (the message is one line naming the fix)."""


@dataclass(frozen=True, order=True)
class ClientRef:
    """A client library at one version, as a scenario, ``--client`` and a cell name say it."""

    family: Family
    version: str

    def __str__(self) -> str:
        return f"{self.family}:{self.version}"

    @property
    def slug(self) -> str:
        """The client as a cell name ends with it: characters a Kafka topic name allows."""
        return f"{self.family}-{self.version}"

    @property
    def folder(self) -> str:
        """Its folder under :data:`CLIENTS_DIR` (a driver's build, a librdkafka release)."""
        name = "confluent-kafka" if self.family == "librdkafka" else self.family
        return f"{name}-{self.version}"


MATRIX_JAVA = ClientRef("java", "3.9.2")
MATRIX_FRANZ_GO = ClientRef("franz-go", "v1.22.2")
MATRIX_DRIVERS = (MATRIX_JAVA, MATRIX_FRANZ_GO)
"""The driver-program clients the matrices run beside the workload's own librdkafka (built by
``make setup``, and into the compose image)."""


def parse_client(text: str) -> ClientRef:
    """``java:3.9.2`` → ClientRef("java", "3.9.2"); a bare version (``2.2.0``) is librdkafka's.
    ClientError for an unknown family or a malformed version."""
    family, _, version = text.rpartition(":")
    family = family or LIBRDKAFKA
    if family not in FAMILIES:
        raise ClientError(
            f"client {text!r}: unknown client library {family!r} "
            f"(known: {', '.join(FAMILIES)}; e.g. java:3.9.2, franz-go:v1.22.2, librdkafka:2.2.0)"
        )
    allowed = set("0123456789.-_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    if not version or not set(version) <= allowed or not version[0].isalnum():
        raise ClientError(f"client {text!r}: {version!r} is not a version")
    return ClientRef(family, version)  # type: ignore[arg-type]


class ClientLaunch(BaseModel):
    """What a session process needs to run its client, decided before the run starts (the
    supervisor passes it in every session spec): which client, and, for a driver program, the
    command that starts it; for an older librdkafka, the folder first on the Python path."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    family: Family
    version: str
    command: tuple[str, ...] = ()
    """The driver program (Java, franz-go); empty for librdkafka (in the session's process)."""
    python_path: str | None = None
    """An older librdkafka's confluent-kafka, first on the session's Python path."""

    @property
    def ref(self) -> ClientRef:
        return ClientRef(self.family, self.version)

    def environment(self, base: dict[str, str]) -> dict[str, str]:
        """The session process' environment with this client in it."""
        if self.python_path is None:
            return base
        paths = [self.python_path, *filter(None, [base.get("PYTHONPATH")])]
        return {**base, "PYTHONPATH": ":".join(paths)}
