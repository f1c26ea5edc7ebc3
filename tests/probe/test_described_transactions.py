"""DescribeTransactions as the probe reads it: a transactional id just initialised (state Empty)
has no start time, which Kafka sends as -1 and kio 0.6.5 refuses to read as a datetime ("Cannot
parse negative timestamp": the probe's txn-late-write flow met it on Kafka 3.9). The probe's
client reads it as the milliseconds sent (:mod:`eoslab.kio_entities`)."""

from __future__ import annotations

import uuid

import pytest

from eoslab.clock import wait_until
from eoslab.kafka_api import error_name
from eoslab.probe.client import KafkaProtocolClient
from eoslab.probe.requests import describe_transactions_request, init_transactional_producer_request
from eoslab.probe.runner import INIT_PRODUCER_ID_TIMEOUT_S, LEADER_LOOKUP_INTERVAL_S, NOT_READY
from eoslab.probe.transcript import NONE
from eoslab.probe.txn_runner import find_transaction_coordinator
from eoslab.rundir.targets import LabTarget
from eoslab.runtime.local import LocalRuntime
from eoslab.scenarios.executor import bootstrap_of

pytestmark = pytest.mark.lab


@pytest.mark.parametrize("target", ["kafka", "refbroker"])
def test_a_transaction_not_begun_is_described_with_no_start_time(
    lab: LocalRuntime, target: LabTarget
) -> None:
    transactional_id = f"probe-described-{uuid.uuid4().hex[:8]}"
    host, port = find_transaction_coordinator(bootstrap_of(target, lab.config), transactional_id)
    with KafkaProtocolClient(host, port) as coordinator:
        answers = []

        def initialised() -> bool:  # a fresh lab's coordinator may be loading its log
            answers.append(
                coordinator.request(init_transactional_producer_request(transactional_id, 10_000))
            )
            return error_name(answers[-1].error_code) not in NOT_READY

        assert wait_until(initialised, INIT_PRODUCER_ID_TIMEOUT_S, LEADER_LOOKUP_INTERVAL_S)
        init = answers[-1]
        assert error_name(init.error_code) == NONE
        (described,) = coordinator.request(
            describe_transactions_request(transactional_id)
        ).transaction_states
    assert error_name(described.error_code) == NONE
    assert described.transaction_state == "Empty"
    assert described.transaction_start_time_ms == -1
    assert (described.producer_id, described.producer_epoch) == (
        init.producer_id,
        init.producer_epoch,
    )
