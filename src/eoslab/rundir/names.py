"""How runs are named: run ids, cell names (scenario, mode, group protocol, client) and the
topic the lab makes for a run.

Part of the run directory's contract: :mod:`eoslab.rundir`."""

from __future__ import annotations

import secrets
import time

from eoslab.clients import parse_client

KIP848_SUFFIX = "kip848"


def cell_name(
    scenario: str, mode: str | None, client: str | None = None, group_protocol: str = "classic"
) -> str:
    """How a run's scenario is named in run ids, matrices and reports: with its handler mode
    when it has a consumer workload (``consumer-crash-before-commit.dedup-table``), ``.kip848``
    when its consumers use the consumer group protocol of KIP-848, and with its client when it is
    not the workload's own librdkafka (``lost-request_librdkafka-2.2.0``,
    ``lost-acks_java-3.9.2``: characters a Kafka topic name allows)."""
    name = scenario if mode is None else f"{scenario}.{mode}"
    if group_protocol == "consumer":
        name = f"{name}.{KIP848_SUFFIX}"
    return name if client is None else f"{name}_{parse_client(client).slug}"


def new_run_id(scenario: str, target: str) -> str:
    """``<UTC time>-<scenario>-<target>-<4 hex>``, e.g. ``20261121T231500Z-baseline-kafka-ab12``:
    sorts by start time, says what ran, and stays unique for runs started the same second."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"{stamp}-{scenario}-{target}-{secrets.token_hex(2)}"


def run_topic(run_id: str) -> str:
    """The topic the lab makes for a run, ``eos-<run id>``: on a cluster of the user's, the
    prefix and the id say whose it is (``eoslab lab prune --external`` deletes no other)."""
    return f"eos-{run_id}"
