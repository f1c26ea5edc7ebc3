"""`probe diff`: the same flow on both targets, compared answer by answer."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from eoslab.probe.command import app
from eoslab.probe.diff import KIP360_RETENTION
from eoslab.probe.flows import FIG5, FLOWS, KIP360
from eoslab.probe.targets import diff_on_lab
from eoslab.refbroker.control_client import RefbrokerControl
from eoslab.runtime.local import LocalRuntime

pytestmark = pytest.mark.lab


@pytest.mark.parametrize("flow", ["fig2", "fig3", "fig4", "fig5", "seq-jump"])
def test_the_sequence_flows_are_identical_on_both_targets(lab: LocalRuntime, flow: str) -> None:
    result = diff_on_lab(FLOWS[flow], lab.config)
    assert result.differences == []
    assert result.identical
    assert result.conforms


def test_kip360_differs_only_by_the_known_state_retention(lab: LocalRuntime) -> None:
    result = diff_on_lab(KIP360, lab.config)
    assert [(d.api, d.what, d.kafka, d.refbroker) for d in result.differences] == [
        ("DescribeProducers", "tracked", True, False)
    ]
    assert result.differences[0].known == KIP360_RETENTION
    assert not result.identical
    assert result.conforms


@pytest.fixture
def refbroker_retaining_six(lab: LocalRuntime) -> Iterator[None]:
    """The reference broker's duplicate cache widened to 6 batches, reset to Kafka's 5 after."""
    control = RefbrokerControl(lab.config.refbroker_control_url)
    control.apply({"kind": "retained-batches", "count": 6})
    try:
        yield
    finally:
        control.apply({"kind": "retained-batches", "count": 5})


@pytest.mark.usefixtures("refbroker_retaining_six")
def test_a_planted_difference_is_reported_as_unexplained(lab: LocalRuntime) -> None:
    result = diff_on_lab(FIG5, lab.config)
    found = {(d.tag, d.what, d.kafka, d.refbroker) for d in result.unexplained}
    # With 6 cached batches the retry of A is a duplicate answered with its first offset.
    assert ("A", "error", "OUT_OF_ORDER_SEQUENCE_NUMBER", "NONE") in found
    assert ("A", "offset", None, 0) in found
    assert not result.conforms


def test_the_cli_prints_the_diff_as_json(lab: LocalRuntime) -> None:
    env = {
        "EOSLAB_PORT_OFFSET": str(lab.config.port_offset),
        "EOSLAB_LAB_DIR": str(lab.config.state_dir),
    }
    result = CliRunner().invoke(app, ["diff", "seq-jump", "--json"], env=env)
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    assert answer["flow"] == "seq-jump"
    assert answer["identical"] is True
    kafka_errors = [
        e["error"] for e in answer["transcripts"]["kafka"]["exchanges"] if e["api"] == "Produce"
    ]
    assert kafka_errors == ["NONE", "NONE", "OUT_OF_ORDER_SEQUENCE_NUMBER", "NONE"]
