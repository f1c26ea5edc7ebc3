"""`probe diff` over the three targets: Kafka 3.9, Kafka 4 and the reference broker answer every
flow alike (the seeds' produce flows, the group flows, the transaction flows: each diffed as
`probe diff` and the nightly diff it); Kafka 4 shows no version difference to 3.9 in any answer
the probe sees."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from eoslab.probe.command import app
from eoslab.probe.diff import KIP360_RETENTION
from eoslab.probe.every_flow import ALL_FLOWS, diff_flow_on_lab
from eoslab.probe.txn_flows import TxnFlow
from eoslab.runtime.local import LocalRuntime

pytestmark = [pytest.mark.lab, pytest.mark.kafka4]


@pytest.mark.parametrize("flow", list(ALL_FLOWS))
def test_kafka4_answers_every_flow_as_kafka_3_9(lab: LocalRuntime, flow: str) -> None:
    result = diff_flow_on_lab(ALL_FLOWS[flow], lab.config)
    assert result.kafka4 is not None
    assert result.kafka4.exchanges
    if isinstance(ALL_FLOWS[flow], TxnFlow):  # played, not only its producer id asked for
        assert "EndTxn" in {e.api for e in result.kafka4.exchanges}
    assert result.versions == []
    assert result.conforms
    if flow == "kip-360":  # Kafka 4 keeps the state DeleteRecords leaves behind, as 3.9 does
        assert [(d.what, d.kafka, d.kafka4, d.refbroker) for d in result.differences] == [
            ("tracked", True, True, False)
        ]
        assert result.differences[0].known == KIP360_RETENTION
    else:
        assert result.identical


def test_the_cli_prints_the_three_way_diff(lab: LocalRuntime) -> None:
    env = {
        "EOSLAB_PORT_OFFSET": str(lab.config.port_offset),
        "EOSLAB_LAB_DIR": str(lab.config.state_dir),
        "COLUMNS": "200",
    }
    printed = CliRunner().invoke(app, ["diff", "fig5"], env=env)
    assert printed.exit_code == 0, printed.output
    assert "fig5: identical on Kafka 3.9, Kafka 4 and the reference broker" in printed.output
    answer = json.loads(CliRunner().invoke(app, ["diff", "fig5", "--json"], env=env).output)
    assert set(answer["transcripts"]) == {"kafka", "kafka4", "refbroker"}
    produced = [
        [e["error"] for e in answer["transcripts"][target]["exchanges"] if e["api"] == "Produce"]
        for target in ("kafka", "kafka4")
    ]
    assert produced[0] == produced[1]
    assert "OUT_OF_ORDER_SEQUENCE_NUMBER" in produced[0]
