"""Reports from hand-written run directories: HTML content, summary.json, JUnit, the trend."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from eoslab.probe.every_flow import FlowSummary, read_summaries, write_summaries
from eoslab.report.command import app
from eoslab.report.outcome import Status, latest_per_cell, load_outcome
from eoslab.report.plots import anomaly_places, fault_windows, run_figure_svg
from eoslab.report.render import read_summary, write_nightly_report, write_run_report
from eoslab.rundir import CONSUMER_ANOMALIES, RunDir
from synthetic_runs import START_MS, make_run

NEGATIVE_CONTROL = {"duplicate": ">0"}


def test_a_negative_control_that_finds_its_anomaly_conforms(tmp_path: Path) -> None:
    run = make_run(
        tmp_path / "runs",
        "no-idempotence",
        "kafka",
        expected=NEGATIVE_CONTROL,
        observed={"duplicate": 4},
    )
    index = write_run_report(run, tmp_path / "reports")
    html = index.read_text()
    assert index == tmp_path / "reports" / "runs" / run.name / "index.html"
    assert 'class="verdict conforms"' in html
    assert 'id="anomaly-duplicate"' in html
    assert "duplicate: 4 (expected &gt;0)" in html
    summary = json.loads((index.parent / "summary.json").read_text())
    assert summary["status"] == "conforms"
    assert {c["name"]: c["observed"] for c in summary["checks"]}["duplicate"] == 4
    suite = ET.parse(index.parent / "junit.xml").getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "0", "0")


def test_a_run_with_consumers_shows_both_halves_and_its_mode(tmp_path: Path) -> None:
    run = make_run(
        tmp_path / "runs",
        "consumer-crash-before-commit",
        "kafka",
        mode="commit-after",
        expected={"effect_duplicate": ">0", "redelivered": ">0"},
        observed={"effect_duplicate": 3, "redelivered": 5},
    )
    outcome = load_outcome(run)
    assert outcome.cell == ("consumer-crash-before-commit.commit-after", "kafka")
    assert outcome.status is Status.CONFORMS
    html = write_run_report(run, tmp_path / "reports").read_text()
    assert "consumers in commit-after" in html
    producer, consumer = html.split('id="producer-half"')[1].split('id="consumer-half"')
    for check in ("duplicate", "misplaced", "corrupt"):
        assert f'data-check="{check}"' in producer
    assert 'data-check="effect_duplicate"' not in producer
    for check in CONSUMER_ANOMALIES:  # Jepsen's poll checks among them
        assert f'data-check="{check}"' in consumer
    assert '"redelivered": 5' in html.split('id="metrics-consumption"')[1].split("</tr>")[0]
    figure = html.split('id="consumer-figure"')[1].split("</svg>")[0]
    for drawn in ("processings / s", "committed lag (records)", "partition 1", "gen 2"):
        assert drawn in figure
    for effect in ("applied", "duplicate", "redelivered"):
        assert effect in figure
    index = write_nightly_report([run], name="night", reports=tmp_path / "reports")
    assert 'data-scenario="consumer-crash-before-commit.commit-after"' in index.read_text()


def test_a_transactional_run_shows_its_transactions_half_and_figures(tmp_path: Path) -> None:
    run = make_run(
        tmp_path / "runs",
        "txn-read-uncommitted",
        "kafka4",
        transactional=True,
        expected={"aborted_read": ">0"},
        observed={"aborted_read": 40},
    )
    assert load_outcome(run).status is Status.CONFORMS
    html = write_run_report(run, tmp_path / "reports").read_text()
    producer, transactions = html.split('id="producer-half"')[1].split('id="transactions-half"')
    assert 'data-check="duplicate"' in producer
    assert 'data-check="aborted_read"' not in producer
    for check in ("aborted_read", "lost_committed", "committed_duplicate", "torn_transaction"):
        assert f'data-check="{check}"' in transactions
    assert 'id="consumer-half"' not in html
    assert 'id="consumer-figure"' not in html
    figures = html.split('id="metrics-transactions"')[1].split("</tr>")[0]
    assert "8 committed" in figures
    assert "records of aborted transactions in the log: 40" in figures


def test_a_mismatch_is_a_junit_failure_that_says_what_was_seen(tmp_path: Path) -> None:
    run = make_run(tmp_path / "runs", "baseline", "refbroker", observed={"duplicate": 2, "lost": 1})
    index = write_run_report(run, tmp_path / "reports")
    assert 'class="verdict does_not_conform"' in index.read_text()
    case = ET.parse(index.parent / "junit.xml").getroot().find("testcase")
    assert case is not None
    assert case.get("name") == "baseline"
    assert case.get("classname") == "eoslab.refbroker"
    failure = case.find("failure")
    assert failure is not None
    assert "lost: expected 0, observed 1" in failure.get("message", "")
    assert "duplicate: expected 0, observed 2" in failure.get("message", "")


def test_a_run_without_verdict_is_an_error_not_a_silent_gap(tmp_path: Path) -> None:
    run = make_run(tmp_path / "runs", "lost-acks", "kafka", checked=False)
    outcome = load_outcome(run)
    assert outcome.status is Status.ERROR
    assert "verdict.json is missing" in (outcome.error or "")
    index = write_run_report(run, tmp_path / "reports")
    case = ET.parse(index.parent / "junit.xml").getroot().find("testcase")
    assert case is not None
    assert case.find("error") is not None


def test_the_last_run_of_a_retried_cell_counts(tmp_path: Path) -> None:
    first = make_run(tmp_path, "baseline", "kafka", checked=False, started_ms=START_MS)
    retry = make_run(tmp_path, "baseline", "kafka", started_ms=START_MS + 60_000)
    other = make_run(tmp_path, "baseline", "refbroker")
    cells = latest_per_cell([load_outcome(p) for p in (retry, first, other)])
    assert [(o.target, o.run_dir) for o in cells] == [
        ("kafka", str(retry)),
        ("refbroker", str(other)),
    ]


def test_fault_windows_pair_start_and_end_and_keep_instants(tmp_path: Path) -> None:
    run = make_run(tmp_path, "lost-acks", "kafka")
    windows = fault_windows(run / "faults.jsonl")
    assert [(w.label, w.start_ms - START_MS, w.end_ms) for w in windows] == [
        ("proxy:drop-response kafka-1", 500, START_MS + 1200),
        ("kill kafka-2", 1500, None),
    ]
    svg = run_figure_svg(run)
    assert svg is not None
    assert svg.startswith("<svg")
    assert "proxy:drop-response kafka-1" in svg
    assert "kill kafka-2" in svg


def test_nightly_matrix_summary_and_trend_over_nights(tmp_path: Path) -> None:
    runs, reports = tmp_path / "runs", tmp_path / "reports"
    night_1 = [
        make_run(runs / "n1", "baseline", "kafka"),
        make_run(runs / "n1", "baseline", "refbroker"),
    ]
    night_2 = [
        make_run(runs / "n2", "baseline", "kafka", observed={"lost": 3}),
        make_run(runs / "n2", "baseline", "refbroker", checked=False),
    ]
    write_nightly_report(night_1, name="20260101T000000", reports=reports)
    index = write_nightly_report(night_2, name="20260102T000000", reports=reports)
    summary = json.loads((index.parent / "summary.json").read_text())
    assert (summary["cells"], summary["conforming"], summary["conforms"]) == (2, 0, False)
    assert {o["target"]: o["status"] for o in summary["outcomes"]} == {
        "kafka": "does not conform",
        "refbroker": "error",
    }
    suite = ET.parse(index.parent / "junit.xml").getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "1")
    for run in night_2:  # every cell links to its own page
        assert (reports / "runs" / run.name / "index.html").is_file()
    trend = (reports / "index.html").read_text()
    trend = trend[trend.index('id="nights"') :]
    assert trend.index("20260102T000000") < trend.index("20260101T000000")  # newest first
    assert "2 / 2" in trend
    assert "0 / 2" in trend


def test_report_command_exits_2_when_the_matrix_does_not_conform(tmp_path: Path) -> None:
    good = make_run(tmp_path / "runs", "baseline", "kafka")
    bad = make_run(tmp_path / "runs", "baseline", "refbroker", observed={"reorder": 1})
    runner = CliRunner()
    reports = str(tmp_path / "reports")
    done = runner.invoke(app, ["nightly", str(good), "--name", "ok", "--reports-dir", reports])
    assert done.exit_code == 0, done.output
    assert done.output.strip().endswith("nightly/ok/index.html")
    done = runner.invoke(app, ["nightly", str(good), str(bad), "--reports-dir", reports])
    assert done.exit_code == 2
    done = runner.invoke(app, ["run", str(tmp_path / "nowhere"), "--reports-dir", reports])
    assert done.exit_code == 1
    assert "not a run directory" in done.output


def test_the_nights_probe_diffs_are_in_the_matrix_and_an_unexplained_one_turns_it_red(
    tmp_path: Path,
) -> None:
    run = make_run(tmp_path / "runs", "baseline", "kafka", observed={})
    as_kafka = FlowSummary(flow="fig2", seed="003", three_way=True, conforms=True)
    differs = FlowSummary(
        flow="txn-abort",
        seed="-",
        conforms=False,
        differences=2,
        known=1,
        unexplained=["step 3 EndTxn error: kafka 'NONE', refbroker 'INVALID_TXN_STATE'"],
    )
    reports = tmp_path / "reports"

    green = write_nightly_report([run], name="green", reports=reports, probe_diffs=[as_kafka])
    assert read_summary(green)["conforms"] is True
    assert read_summary(green)["probe_diffs"] == {"flows": 1, "conforming": 1}

    red = write_nightly_report([run], name="red", reports=reports, probe_diffs=[as_kafka, differs])
    summary = read_summary(red)
    assert summary["conforms"] is False
    assert summary["probe_diffs"] == {"flows": 2, "conforming": 1}
    html = red.read_text()
    assert "1 of 2 probe flows answered as Kafka" in html
    assert "DIFFERS" in html
    assert "refbroker &#39;INVALID_TXN_STATE&#39;" in html

    path = tmp_path / "probe-diffs.json"
    write_summaries(path, [as_kafka, differs])
    assert read_summaries(path) == [as_kafka, differs]
    assert read_summaries(tmp_path / "none.json") == []


def _anomaly_table(run_dir: Path, name: str, rows: list[tuple[int, int | None]]) -> None:
    folder = RunDir(run_dir).anomaly_dir(name)
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.table(
        {
            "partition": pa.array([p for p, _ in rows], pa.int32()),
            "offset": pa.array([o for _, o in rows], pa.int64()),
        }
    )
    pq.write_table(table, folder / "part-0.parquet")


def test_the_run_page_shows_where_the_anomalies_sit(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "runs", "baseline", "kafka", observed={"duplicate": 3})
    _anomaly_table(run_dir, "duplicate", [(0, 5), (0, 6), (1, 9)])
    _anomaly_table(run_dir, "lost", [(0, None), (1, None)])
    _anomaly_table(run_dir, "reorder", [])  # found nothing: not drawn
    _anomaly_table(run_dir, "indeterminate", [(0, 3)])  # an outcome, not an anomaly
    places = anomaly_places(run_dir)
    assert [(a.name, a.partitions, a.offsets, a.not_in_log) for a in places] == [
        ("duplicate", [0, 0, 1], [5, 6, 9], 0),
        ("lost", [], [], 2),
    ]
    page = write_run_report(run_dir, tmp_path / "reports").read_text()
    section = page.split('<div id="anomaly-map">')[1].split("</div>")[0]
    assert "<svg" in section
    assert "duplicate (3)" in section
    assert "lost (2, 2 not in the log)" in section
    assert "indeterminate" not in section
    assert "reorder" not in section

    clean = make_run(tmp_path / "runs", "baseline", "refbroker")
    assert anomaly_places(clean) == []
    assert 'id="anomaly-map"' not in write_run_report(clean, tmp_path / "reports").read_text()


def test_a_run_of_a_bug_scenario_names_the_bug_and_how_it_is_reproduced(tmp_path: Path) -> None:
    emulated = write_run_report(
        make_run(tmp_path / "runs", "kafka-7190", "refbroker"), tmp_path / "reports"
    )
    assert 'href="https://issues.apache.org/jira/browse/KAFKA-7190">KAFKA-7190</a>' in (
        emulated.read_text()
    )
    assert "reproduced emulated on the reference broker" in emulated.read_text()
    real = make_run(tmp_path / "runs", "kafka-14417", "kafka", client="java:3.3.1")
    html = write_run_report(real, tmp_path / "reports").read_text()
    assert "reproduced in the software" in html
    assert "client java:3.3.1" in html
