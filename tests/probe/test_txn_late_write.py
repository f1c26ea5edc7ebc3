"""KAFKA-12671 on the software it lived in: a transactional Produce delivered after its
transaction's abort (the probe's txn-late-write flow). Kafka 3.9 with KIP-890's verification off
(the leader's behaviour before 3.6) writes it and the partition hangs past the transaction's
timeout; with the default verification, and on the reference broker, it is refused and nothing
hangs. Kafka 4.4 and the reference broker against 3.9's default: the three-way diff
(tests/probe/test_three_way_diff.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from eoslab.admin import restore_broker_configs, set_broker_configs
from eoslab.probe.transcript import NONE
from eoslab.probe.txn_flows import TXN_LATE_WRITE
from eoslab.probe.txn_runner import TxnFlowRun, run_txn_flow_on_lab
from eoslab.runtime.local import LocalRuntime

pytestmark = pytest.mark.lab

VERIFICATION = "transaction.partition.verification.enable"


@pytest.fixture
def unverified(lab: LocalRuntime) -> Iterator[None]:
    """Kafka 3.9's leaders write a transactional batch without asking the coordinator."""
    bootstrap = lab.config.bootstrap("kafka")
    previous = set_broker_configs(bootstrap, {VERIFICATION: "false"})
    try:
        yield
    finally:
        restore_broker_configs(bootstrap, previous)


def late_write(run: TxnFlowRun) -> tuple[str | None, int, int, str]:
    """(the late Produce's answer, the last stable offset, the log end, the coordinator's
    state of the transaction) once its timeout has passed."""
    (produce,) = [e for e in run.exchanges if e.api == "Produce"]
    stable, end = (e.detail["offset"] for e in run.exchanges if e.api == "ListOffsets")
    (described,) = [e.detail for e in run.exchanges if e.api == "DescribeTransactions"]
    return produce.error, stable, end, described["state"]


def test_a_late_write_after_the_abort_hangs_the_partition_without_verification(
    lab: LocalRuntime, unverified: None
) -> None:
    error, stable, end, state = late_write(run_txn_flow_on_lab(TXN_LATE_WRITE, "kafka", lab.config))
    assert error == NONE  # written: a transaction the coordinator does not know is open
    assert state == "CompleteAbort"  # ... the coordinator thinks it over
    # the abort marker at 0, the late record at 1: the LSO stays at 1, past the 2 s timeout
    assert (stable, end) == (1, 2)


@pytest.mark.parametrize("target", ["kafka", "refbroker"])
def test_a_late_write_after_the_abort_is_refused_with_verification(
    lab: LocalRuntime, target: str
) -> None:
    error, stable, end, state = late_write(run_txn_flow_on_lab(TXN_LATE_WRITE, target, lab.config))
    assert error != NONE
    assert state == "CompleteAbort"
    assert stable == end == 1  # the abort marker alone: nothing hangs
