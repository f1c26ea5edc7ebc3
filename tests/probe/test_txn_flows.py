"""The transaction flows: the answers each is about, asserted on each of the lab's targets
(their diff over Kafka 3.9, Kafka 4 and the reference broker: tests/probe/test_three_way_diff.py)."""

from __future__ import annotations

import pytest

from eoslab.probe.transcript import Exchange
from eoslab.probe.txn_flows import TXN_FENCE, TXN_LSO, TXN_OFFSETS, TXN_TIMEOUT
from eoslab.probe.txn_runner import run_txn_flow_on_lab
from eoslab.runtime.local import LocalRuntime

pytestmark = pytest.mark.lab

TARGETS = pytest.mark.parametrize("target", ["kafka", "refbroker"])


def answers(exchanges: list[Exchange], api: str) -> list[str | None]:
    return [e.error for e in exchanges if e.api == api]


@TARGETS
def test_the_old_epoch_is_fenced_everywhere(lab: LocalRuntime, target: str) -> None:
    run = run_txn_flow_on_lab(TXN_FENCE, target, lab.config)
    assert [(e.tag, e.error, e.epoch) for e in run.exchanges if e.api == "InitProducerId"] == [
        ("p", "NONE", 0),
        ("q", "CONCURRENT_TRANSACTIONS", -1),
        ("q", "NONE", 2),  # the fence's abort took epoch 1
        ("p", "PRODUCER_FENCED", -1),  # its recovery at (id, 0), as franz-go's next write sends
    ]
    fenced = [(e.api, e.error) for e in run.exchanges if e.tag == "p"][3:]
    assert fenced == [
        ("Produce", "INVALID_PRODUCER_EPOCH"),
        ("AddPartitionsToTxn", "PRODUCER_FENCED"),
        ("EndTxn", "PRODUCER_FENCED"),
        ("InitProducerId", "PRODUCER_FENCED"),
    ]


@TARGETS
def test_a_marker_moves_the_last_stable_offset(lab: LocalRuntime, target: str) -> None:
    run = run_txn_flow_on_lab(TXN_LSO, target, lab.config)
    offsets = [
        (e.detail["committed"], e.detail["offset"]) for e in run.exchanges if e.api == "ListOffsets"
    ]
    # p's transaction holds offsets 0-1, q's offset 2; q's marker (3) does not move the LSO
    assert offsets == [(True, 0), (False, 3), (True, 0), (True, 5)]


@TARGETS
def test_transactional_offsets_are_pending_until_the_commit(lab: LocalRuntime, target: str) -> None:
    run = run_txn_flow_on_lab(TXN_OFFSETS, target, lab.config)
    fetched = [
        (e.detail["offset"], e.detail["partition_error"])
        for e in run.exchanges
        if e.api == "OffsetFetch"
    ]
    assert fetched == [(-1, "UNSTABLE_OFFSET_COMMIT"), (-1, "NONE"), (5, "NONE"), (5, "NONE")]
    assert answers(run.exchanges, "TxnOffsetCommit") == ["NONE", "INVALID_TXN_STATE"]


@TARGETS
def test_a_hanging_transaction_is_aborted_and_its_producer_fenced(
    lab: LocalRuntime, target: str
) -> None:
    run = run_txn_flow_on_lab(TXN_TIMEOUT, target, lab.config)
    (described,) = [e.detail for e in run.exchanges if e.api == "DescribeTransactions"]
    assert (described["state"], described["epoch"]) == ("CompleteAbort", 1)
    assert answers(run.exchanges, "EndTxn") == ["PRODUCER_FENCED"]
    assert [e.detail["offset"] for e in run.exchanges if e.api == "ListOffsets"] == [2]
