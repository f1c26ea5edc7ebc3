"""Kafka's Java client 4.4 (kafka-tools 4.4's TransactionalMessageCopier) copies transactionally,
exactly once, on the lab's Kafka 4.4 and on the lab's reference broker, with the transaction
protocol each broker finalises (KIP-890 part 2):

- Kafka 4.4 (KRaft) finalises the feature ``transaction.version`` at 2, and the client uses the
  protocol v2: no AddPartitionsToTxn or AddOffsetsToTxn (Produce v12+ and TxnOffsetCommit v5+
  add the partitions implicitly; the 4.4 client sends Produce v13 and TxnOffsetCommit v6), EndTxn
  v5, whose answer carries the producer epoch bumped for the next transaction: one bump per
  transaction;
- the reference broker advertises no ``transaction.version`` (transaction_coordinator.py, item
  6), and the same client falls back to version 1: AddPartitionsToTxn and AddOffsetsToTxn in
  every transaction, EndTxn v4 and below, the epoch of InitProducerId kept to the end.

The evidence: the finalised levels from the broker's ApiVersions answer, the requests the
client's producer logged sending (NetworkClient at DEBUG, with their versions), the producer
epochs its InitProducerId and EndTxn answers carried, the coordinator's epoch after the copy
(DescribeTransactions) and, on the reference broker, its own request counters.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from group_scenarios import GroupTarget
from txn_clients import transaction_epoch
from txn_scenarios import java_transactional_copy

from eoslab.admin import finalized_features
from eoslab.refbroker.control_client import RefbrokerControl
from eoslab.runtime.local import LocalRuntime
from eoslab.scenarios.executor import REPLICATION, bootstrap_of
from eoslab.settings import kafka4_lib

pytestmark = pytest.mark.lab

TRANSACTION_VERSION = "transaction.version"
MIN_TRANSACTIONS = 6
"""60 records copied in transactions of up to 10 (max.poll.records), the aborted ones again."""


@pytest.fixture(params=[pytest.param("kafka4", marks=pytest.mark.kafka4), "refbroker"])
def target(lab: LocalRuntime, request: pytest.FixtureRequest) -> GroupTarget:
    name = str(request.param)
    return GroupTarget(name, bootstrap_of(name, lab.config), REPLICATION.get(name, 1))


def test_the_java_client_4_4_copies_with_the_transaction_version_the_broker_finalises(
    target: GroupTarget, lab: LocalRuntime, tmp_path: Path
) -> None:
    name = target.name
    transactional_id = f"lab-java44-{name}"
    features = finalized_features(target.bootstrap)
    assert features is not None, f"no ApiVersions answer from {target.bootstrap}"
    refbroker = RefbrokerControl(lab.config.refbroker_control_url) if name == "refbroker" else None
    counted_before = refbroker.counters()["requests"] if refbroker else {}

    copier = java_transactional_copy(
        target,
        f"lab-java44-in-{name}",
        f"lab-java44-out-{name}",
        tmp_path,
        transactional_id,
        lib=kafka4_lib(),
    )

    sent = copier.requests()
    transactions = len(sent.epochs("END_TXN"))  # ended: committed or aborted
    assert transactions >= MIN_TRANSACTIONS, sent.sent
    (init_epoch,) = sent.epochs("INIT_PRODUCER_ID")  # one session, initialised once
    _, epoch, state = transaction_epoch(target.bootstrap, transactional_id)
    assert state == "CompleteCommit"
    if name == "kafka4":
        assert features.get(TRANSACTION_VERSION) == 2, features
        assert sent.count("ADD_PARTITIONS_TO_TXN") == sent.count("ADD_OFFSETS_TO_TXN") == 0
        assert sent.versions("END_TXN") == {5}, sent.sent
        assert min(sent.versions("PRODUCE")) >= 12, sent.sent
        assert min(sent.versions("TXN_OFFSET_COMMIT")) >= 5, sent.sent
        assert any("Updating isTV2 enabled to true" in line for line in sent.tv2_lines)
        # every EndTxn answer is the epoch bumped once more, and the coordinator keeps the last
        bumps = list(range(init_epoch + 1, init_epoch + 1 + transactions))
        assert sent.epochs("END_TXN") == bumps
        assert epoch == bumps[-1]
    else:
        assert TRANSACTION_VERSION not in features, features
        # at least one AddPartitionsToTxn and one AddOffsetsToTxn in every transaction
        assert sent.count("ADD_PARTITIONS_TO_TXN") >= transactions, sent.sent
        assert sent.count("ADD_OFFSETS_TO_TXN") >= transactions, sent.sent
        assert max(sent.versions("END_TXN")) <= 4, sent.sent
        assert max(sent.versions("PRODUCE")) <= 11, sent.sent
        assert max(sent.versions("TXN_OFFSET_COMMIT")) <= 4, sent.sent
        assert not any("Updating isTV2 enabled to true" in line for line in sent.tv2_lines)
        assert sent.epochs("END_TXN") == [-1] * transactions  # EndTxn v4 answers no epoch
        assert epoch == init_epoch  # no bump since InitProducerId
        assert refbroker is not None
        counted = refbroker.counters()["requests"]
        for api, logged in (("AddPartitionsToTxn", "ADD_PARTITIONS_TO_TXN"), ("EndTxn", "END_TXN")):
            assert counted.get(api, 0) - counted_before.get(api, 0) == sent.count(logged), api
