"""franz-go (``github.com/twmb/franz-go``) as a workload driver: the program in
``services/clients/franz-go/``, built once per module version."""

from __future__ import annotations

from collections.abc import Callable

from eoslab.clients import ClientError, ClientLaunch


def prepare(version: str, say: Callable[[str], None]) -> ClientLaunch:
    raise ClientError(f"franz-go:{version}: the franz-go driver is not built yet")
