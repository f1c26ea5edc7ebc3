"""Each seed flow on the real 3-broker Kafka (RF 3) and on the lab's reference broker."""

from __future__ import annotations

import pytest
from probe_log import errors, logged, relative_offsets, written

from eoslab.probe.flows import FIG2, FIG3, FIG4, FIG5, KIP360, SEQ_JUMP
from eoslab.probe.runner import FlowRun
from eoslab.probe.targets import run_on_lab
from eoslab.rundir.targets import LabTarget
from eoslab.runtime.local import LocalRuntime
from eoslab.scenarios.executor import bootstrap_of

pytestmark = pytest.mark.lab

OOOSN = "OUT_OF_ORDER_SEQUENCE_NUMBER"
TARGETS = pytest.mark.parametrize("target", ["kafka", "refbroker"])


@TARGETS
def test_fig2_five_batches_in_two_flights_are_appended_in_order(
    lab: LocalRuntime, target: LabTarget
) -> None:
    run = run_on_lab(FIG2, target, lab.config)
    assert errors(run) == ["NONE"] * 5
    assert relative_offsets(run) == [0, 7, 11, 19, 29]
    assert logged(run, bootstrap_of(target, lab.config)) == written(run, "ABCDE")


@TARGETS
def test_fig3_resent_batches_whose_acks_were_lost_get_their_original_offsets(
    lab: LocalRuntime, target: LabTarget
) -> None:
    run = run_on_lab(FIG3, target, lab.config)
    produced = run.produced()
    assert [e.ack_lost for e in produced] == [False] * 3 + [True] * 2 + [False] * 2
    assert errors(run) == ["NONE"] * 7
    assert relative_offsets(run) == [0, 7, 11, 19, 29, 19, 29]
    assert logged(run, bootstrap_of(target, lab.config)) == written(run, "ABCDE")


@TARGETS
def test_fig4_batches_after_a_lost_one_are_out_of_order_until_resent_under_a_new_epoch(
    lab: LocalRuntime, target: LabTarget
) -> None:
    run = run_on_lab(FIG4, target, lab.config)
    assert errors(run) == ["NONE", "NONE", OOOSN, OOOSN, "NONE", "NONE", "NONE"]
    assert relative_offsets(run) == [0, 7, None, None, 11, 19, 29]
    assert run.epoch is not None
    assert [(e.epoch, e.base_sequence) for e in run.produced()[4:]] == [
        (run.epoch + 1, 0),
        (run.epoch + 1, 8),
        (run.epoch + 1, 18),
    ]
    assert logged(run, bootstrap_of(target, lab.config)) == written(
        run, "ABCDE"
    )  # complete, in order, once


@TARGETS
def test_fig5_six_in_flight_and_a_lost_first_ack_duplicate_a(
    lab: LocalRuntime, target: LabTarget
) -> None:
    run = run_on_lab(FIG5, target, lab.config)
    assert errors(run) == ["NONE"] * 6 + [OOOSN, "NONE"]
    assert relative_offsets(run) == [0, 7, 11, 19, 29, 37, None, 42]
    assert logged(run, bootstrap_of(target, lab.config)) == written(run, "ABCDEF") + written(
        run, "A"
    )  # A twice: the duplicate


@TARGETS
def test_000_sequence_jump_is_refused_and_leaves_the_log_untouched(
    lab: LocalRuntime, target: LabTarget
) -> None:
    run = run_on_lab(SEQ_JUMP, target, lab.config)
    assert [e.base_sequence for e in run.produced()] == [0, 1, 111, 2]
    assert errors(run) == ["NONE", "NONE", OOOSN, "NONE"]
    assert relative_offsets(run) == [0, 1, None, 2]
    assert logged(run, bootstrap_of(target, lab.config)) == [("a", 0), ("b", 0), ("c", 0)]


def describe_after_removal(run: FlowRun) -> dict[str, object]:
    (described,) = [e for e in run.exchanges if e.api == "DescribeProducers"]
    assert described.error == "NONE"
    return described.detail


def test_002_kafka_keeps_the_producer_state_past_delete_records(lab: LocalRuntime) -> None:
    run = run_on_lab(KIP360, "kafka", lab.config)
    (removal,) = [e for e in run.exchanges if e.api == "DeleteRecords"]
    assert removal.error == "NONE"
    assert removal.detail == {"low_watermark": 2}
    assert describe_after_removal(run) == {"tracked": True, "last_sequence": 1, "producer_epoch": 0}
    assert errors(run) == ["NONE"] * 3
    assert relative_offsets(run) == [0, 1, 2]


def test_002_refbroker_forgets_an_expired_producer_and_accepts_its_next_sequence(
    lab: LocalRuntime,
) -> None:
    run = run_on_lab(KIP360, "refbroker", lab.config)
    (removal,) = [e for e in run.exchanges if e.api == "control:expire-producers"]
    assert removal.detail == {"removed": 1}
    assert describe_after_removal(run)["tracked"] is False
    assert errors(run) == ["NONE"] * 3  # the lab's reference broker runs the kafka-3.9 rules
    assert relative_offsets(run) == [0, 1, 2]
