"""Which releases of a client its registry has: Maven Central for Kafka's Java client, the Go
module proxy for franz-go, PyPI for librdkafka (confluent-kafka's wheels bundle it) — what a
range such as ``java:2.7.0..3.9.1`` spans, for ``eoslab bisect``. Stable releases only (no
pre-releases), ascending."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable

from eoslab.clients import ClientError, ClientRef, Family, parse_client

TIMEOUT_S = 30.0
MAVEN_METADATA = (
    "https://repo.maven.apache.org/maven2/org/apache/kafka/kafka-clients/maven-metadata.xml"
)
GO_PROXY_LIST = "https://proxy.golang.org/github.com/twmb/franz-go/@v/list"
PYPI_JSON = "https://pypi.org/pypi/confluent-kafka/json"
STABLE = re.compile(r"^v?\d+(\.\d+)+$")

Version = tuple[int, ...]


def version_key(version: str) -> Version:
    """``v1.20.6`` / ``3.9.1`` as a tuple that sorts as releases do."""
    return tuple(int(part) for part in version.removeprefix("v").split("."))


def _fetch(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
            return str(answer.read().decode())
    except OSError as error:
        raise ClientError(f"the registry at {url} did not answer: {error}") from None


def _maven() -> list[str]:
    return re.findall(r"<version>([^<]+)</version>", _fetch(MAVEN_METADATA))


def _go() -> list[str]:
    return _fetch(GO_PROXY_LIST).split()


def _pypi() -> list[str]:
    return list(json.loads(_fetch(PYPI_JSON))["releases"])


LISTINGS: dict[Family, Callable[[], list[str]]] = {
    "java": _maven,
    "franz-go": _go,
    "librdkafka": _pypi,
}


def releases(family: Family) -> list[str]:
    """Every stable release the family's registry lists, oldest first."""
    return sorted({v for v in LISTINGS[family]() if STABLE.match(v)}, key=version_key)


def parse_range(text: str) -> tuple[ClientRef, ClientRef]:
    """``java:2.7.0..3.9.1`` → the two ends (one family); ClientError when malformed."""
    low, sep, high = text.partition("..")
    if not sep or not high:
        raise ClientError(f"client range {text!r}: give FAMILY:LOW..HIGH, e.g. java:2.7.0..3.9.1")
    first = parse_client(low)
    last = parse_client(f"{first.family}:{high}")
    if not (STABLE.match(first.version) and STABLE.match(last.version)):
        raise ClientError(f"client range {text!r}: the ends must be releases, e.g. 2.7.0")
    if version_key(first.version) >= version_key(last.version):
        raise ClientError(f"client range {text!r}: {first.version} is not before {last.version}")
    return first, last


def within(text: str, listed: list[str] | None = None) -> list[ClientRef]:
    """The releases a range spans (both ends included, each listed by the registry); ClientError
    when an end is not a release the registry has."""
    first, last = parse_range(text)
    available = releases(first.family) if listed is None else listed
    missing = [end.version for end in (first, last) if end.version not in available]
    if missing:
        raise ClientError(f"client range {text!r}: {', '.join(missing)} not in the registry")
    low, high = version_key(first.version), version_key(last.version)
    return [ClientRef(first.family, v) for v in available if low <= version_key(v) <= high]
