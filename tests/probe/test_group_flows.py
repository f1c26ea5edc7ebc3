"""The group flows (seed 004's rebalance protocol): the answers each is about, asserted on each
target (their diff over Kafka 3.9, Kafka 4 and the reference broker:
tests/probe/test_three_way_diff.py)."""

from __future__ import annotations

import pytest
from kio.schema.api_versions.v3 import ApiVersionsRequest

from eoslab.probe.client import KafkaProtocolClient
from eoslab.probe.group_flows import JOIN_BARRIER, STALE_COMMIT
from eoslab.probe.targets import run_group_flow_on_lab
from eoslab.runtime.local import LocalRuntime

pytestmark = pytest.mark.lab


def answers(flow_run: object) -> list[tuple[str, str | None, str | None]]:
    return [(e.api, e.tag, e.error) for e in flow_run.exchanges]  # type: ignore[attr-defined]


@pytest.mark.parametrize("target", ["kafka", "refbroker"])
def test_the_barrier_holds_b_until_a_rejoins(lab: LocalRuntime, target: str) -> None:
    run = run_group_flow_on_lab(JOIN_BARRIER, target, lab.config)
    waiting = [e.detail["waiting"] for e in run.exchanges if e.api == "(waiting)"]
    assert waiting == [True, True]  # b's JoinGroup, then b's SyncGroup, held
    joins = [e for e in run.exchanges if e.api == "JoinGroup" and e.error == "NONE"]
    assert [(e.tag, e.detail["generation"], e.detail["members"]) for e in joins] == [
        ("a", 1, ["a"]),
        ("b", 2, []),
        ("a", 2, ["a", "b"]),
    ]


@pytest.mark.parametrize("target", ["kafka", "refbroker"])
def test_a_stale_generation_cannot_commit(lab: LocalRuntime, target: str) -> None:
    run = run_group_flow_on_lab(STALE_COMMIT, target, lab.config)
    commits = [e.error for e in run.exchanges if e.api == "OffsetCommit"]
    assert commits == [
        "NONE",
        "NONE",
        "REBALANCE_IN_PROGRESS",
        "ILLEGAL_GENERATION",
        "UNKNOWN_MEMBER_ID",
        "NONE",
    ]
    (fetched,) = [e for e in run.exchanges if e.api == "OffsetFetch"]
    assert fetched.detail == {"offsets": [8, -1]}


GROUP_APIS = (8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47)
KIO_MINIMUMS = {8: 2, 9: 1}
"""OffsetCommit v0-1 and OffsetFetch v0: kio has no schema, the reference broker starts later."""


def group_api_ranges(bootstrap: str) -> dict[int, tuple[int, int]]:
    host, port = bootstrap.split(",", maxsplit=1)[0].rsplit(":", 1)
    request = ApiVersionsRequest(client_software_name="eoslab", client_software_version="1")
    with KafkaProtocolClient(host, int(port)) as client:
        keys = client.request(request).api_keys
    return {k.api_key: (k.min_version, k.max_version) for k in keys if k.api_key in GROUP_APIS}


def test_the_group_apis_are_advertised_with_kafkas_ranges(lab: LocalRuntime) -> None:
    kafka = group_api_ranges(lab.config.bootstrap_servers)
    expected = {
        key: (max(low, KIO_MINIMUMS.get(key, low)), high) for key, (low, high) in kafka.items()
    }
    assert set(kafka) == set(GROUP_APIS)
    assert group_api_ranges(lab.config.refbroker_bootstrap) == expected
