"""The diff's comparison and its known-divergence table, on hand-made transcripts (pure logic)."""

from __future__ import annotations

import pytest
from rich.console import Console
from typer.testing import CliRunner

from eoslab.probe import command
from eoslab.probe.command import app, transcript_table
from eoslab.probe.diff import VERSION_DIFFERENCE, diff_group_runs, diff_runs
from eoslab.probe.flows import KIP360
from eoslab.probe.group_flows import JOIN_BARRIER
from eoslab.probe.group_runner import GroupFlowRun
from eoslab.probe.runner import FlowRun
from eoslab.probe.transcript import Exchange


def kip360_run(target: str, after_removal: str, tracked: bool) -> FlowRun:
    """A hand-made kip-360 transcript (pure logic: no broker)."""
    run = FlowRun(KIP360, target, "t", 0, "run", "session")
    answers = [("a", "NONE", 0), ("b", "NONE", 1)]
    for step, (tag, error, offset) in enumerate(answers):
        run.exchanges.append(Exchange(step * 2, "Produce", 0, tag, error=error, base_offset=offset))
    run.exchanges.append(
        Exchange(5, "DescribeProducers", 0, error="NONE", detail={"tracked": tracked})
    )
    offset = 2 if after_removal == "NONE" else -1
    run.exchanges.append(Exchange(6, "Produce", 0, "c", error=after_removal, base_offset=offset))
    return run


def test_the_kafka_2_0_answer_to_kip360_is_a_known_divergence() -> None:
    result = diff_runs(
        kip360_run("kafka", "NONE", tracked=True),
        kip360_run("refbroker", "UNKNOWN_PRODUCER_ID", tracked=False),
    )
    assert [(d.tag, d.what) for d in result.differences] == [
        (None, "tracked"),
        ("c", "error"),
        ("c", "offset"),
    ]
    assert all(d.known for d in result.differences)
    assert result.conforms


def test_the_same_answer_at_another_point_is_not_excused() -> None:
    kafka = kip360_run("kafka", "NONE", tracked=True)
    refbroker = kip360_run("refbroker", "NONE", tracked=True)
    refbroker.exchanges[1].error = "UNKNOWN_PRODUCER_ID"  # on "b", before the removal
    result = diff_runs(kafka, refbroker)
    assert [(d.tag, d.what, d.kafka, d.refbroker, d.known) for d in result.differences] == [
        ("b", "error", "NONE", "UNKNOWN_PRODUCER_ID", None),
        ("b", "offset", 1, None, None),
    ]
    assert not result.conforms


def barrier_run(target: str, generation: int) -> GroupFlowRun:
    """A hand-made group transcript: one JoinGroup answer."""
    run = GroupFlowRun(JOIN_BARRIER, target, "t", "g")
    detail = {"generation": generation, "leader": True, "members": ["a"]}
    run.exchanges.append(Exchange(2, "JoinGroup", 0, "a", error="NONE", detail=detail))
    return run


def test_group_transcripts_are_compared_on_every_recorded_detail() -> None:
    same = diff_group_runs(barrier_run("kafka", 1), barrier_run("refbroker", 1))
    assert same.identical
    different = diff_group_runs(barrier_run("kafka", 1), barrier_run("refbroker", 2))
    assert [
        (d.api, d.tag, d.what, d.kafka, d.refbroker, d.known) for d in different.differences
    ] == [("JoinGroup", "a", "generation", 1, 2, None)]
    assert not different.conforms


def test_a_group_transcript_prints_as_a_table_and_the_flows_are_listed() -> None:
    console = Console(width=200, record=True)
    console.print(transcript_table(barrier_run("refbroker", 1)))
    printed = console.export_text()
    assert "group g, coordinator None" in printed
    assert '"generation":1' in printed
    listed = CliRunner().invoke(app, ["list"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0
    assert all(name in listed.output for name in ("group-join-barrier", "group-stale-commit"))


def test_kafka4_answering_otherwise_is_a_version_difference_not_a_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kafka = kip360_run("kafka", "NONE", tracked=True)
    kafka4 = kip360_run("kafka4", "NONE", tracked=True)
    kafka4.exchanges[-1].error = "UNKNOWN_PRODUCER_ID"  # as if 4.x had forgotten the producer
    result = diff_runs(kafka, kip360_run("refbroker", "NONE", tracked=False), kafka4)
    assert [(d.tag, d.what, d.kafka, d.kafka4, d.known) for d in result.versions] == [
        ("c", "error", "NONE", "UNKNOWN_PRODUCER_ID", VERSION_DIFFERENCE),
        ("c", "offset", 2, None, VERSION_DIFFERENCE),
    ]
    # the reference broker is still judged against Kafka 3.9 alone, each row showing Kafka 4
    assert [(d.what, d.kafka, d.refbroker, d.kafka4) for d in result.differences] == [
        ("tracked", True, False, True)
    ]
    assert result.conforms
    assert not result.identical
    answer = result.as_json()
    assert set(answer["transcripts"]) == {"kafka", "kafka4", "refbroker"}
    assert len(answer["version_differences"]) == 2
    recorder = Console(width=200, record=True)
    monkeypatch.setattr(command, "console", recorder)
    command.print_diff(result)
    printed = recorder.export_text()
    assert "kafka4" in printed
    assert "2 version difference(s) between the two Kafkas" in printed


def test_a_three_way_diff_of_equal_answers_is_identical() -> None:
    result = diff_group_runs(
        barrier_run("kafka", 1), barrier_run("refbroker", 1), barrier_run("kafka4", 1)
    )
    assert result.identical
    assert result.versions == []
