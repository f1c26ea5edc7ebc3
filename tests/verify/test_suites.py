"""The versioned GX suite files of `expectations/`: they load, and broken ones are refused; the
query plans of the ledgers' windows and of the suites' queries shuffle nothing of their own."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from eoslab.rundir import (
    COMMITS_SCHEMA,
    CONSUMER_ANOMALIES,
    COPY_ANOMALIES,
    PROCESSED_SCHEMA,
    PRODUCER_ANOMALIES,
    TRANSACTION_ANOMALIES,
)
from eoslab.verify.consumer import anomalies as consumer_anomalies
from eoslab.verify.consumer.consumption import EFFECT_COLUMNS, LEDGER_NAMES
from eoslab.verify.consumer.ledger import build_consumer_ledger, build_polls
from eoslab.verify.producer.history import read_history
from eoslab.verify.producer.ledger import build_ledger, by_key, run_rows
from eoslab.verify.suites import (
    CONSUMER_SUITE_NAMES,
    SUITE_NAMES,
    SuiteFile,
    SuiteFileError,
    load_suites,
)


def test_repository_suites_load_versioned_and_cover_every_anomaly() -> None:
    suites = load_suites()
    every_suite = load_suites(consumed=True)

    assert [s.name for s in suites] == list(SUITE_NAMES)
    assert [s.name for s in every_suite] == [*SUITE_NAMES, *CONSUMER_SUITE_NAMES]
    assert all(s.version >= 1 for s in every_suite)
    covered = {a for s in suites for e in s.expectations for a in e["meta"]["anomalies"]}
    assert covered == set(PRODUCER_ANOMALIES) - {"indeterminate"}  # allowed, so no expectation
    consumer_covered = {
        a
        for s in every_suite[len(suites) :]
        for e in s.expectations
        for a in e["meta"]["anomalies"]
    }
    assert consumer_covered == set(CONSUMER_ANOMALIES) - {"redelivered"}  # allowed, likewise
    for suite in every_suite:
        assert len(suite.to_gx().expectations) == len(suite.expectations)
    (transactions,) = load_suites(transactional=True)[len(suites) :]
    assert transactions.name == "transactions"
    assert transactions.asset == "txn_ledger"
    assert {a for e in transactions.expectations for a in e["meta"]["anomalies"]} == set(
        TRANSACTION_ANOMALIES
    )
    assert len(transactions.to_gx().expectations) == len(transactions.expectations)
    (copied,) = load_suites(copied=True)[len(suites) :]
    assert (copied.name, copied.asset) == ("copy", "copy_ledger")
    assert {a for e in copied.expectations for a in e["meta"]["anomalies"]} == set(COPY_ANOMALIES)
    assert len(copied.to_gx().expectations) == len(copied.expectations)


def test_every_suite_query_runs_on_its_asset_without_a_shuffle(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The suites' windows are partitioned as their asset is clustered: over the checker's
    cached frames, no query plans an exchange of its own (at 8M records each one costs
    seconds)."""
    classified = spark.createDataFrame(
        [("s1", 0, 0, 0, 0, "k0", 0, None, None), ("s1", 0, 1, 1, 1, "k0", 1, None, None)],
        "session_id string, producer int, partition int, offset bigint, seq bigint, "
        "key string, key_seq bigint, reason string, value_head string",
    )
    ledger = build_ledger(classified, read_history(spark, tmp_path)).persist()
    key_ledger = by_key(ledger).persist()
    frames = {"log": ledger, "ledger": run_rows(ledger), "key_ledger": key_ledger}
    try:
        for suite in load_suites():
            frames[suite.asset].createOrReplaceTempView("asset")
            for expectation in suite.expectations:
                query = expectation["kwargs"].get("unexpected_rows_query")
                if query is None:
                    continue
                frame = spark.sql(query.replace("{batch}", "asset"))
                assert frame.count() == 0
                operators = names(plan_nodes(frame))
                assert "Exchange" not in operators, (suite.name, operators)
    finally:
        ledger.unpersist()
        key_ledger.unpersist()


@dataclass
class PlanNode:
    """One operator of a physical plan, as Spark prints it."""

    name: str
    children: list[PlanNode] = field(default_factory=list)


PLAN_LINE = re.compile(r"^(?P<prefix>[ :]*(?:[+:]- )?)(?:\*\(\d+\) )?(?P<name>[A-Za-z]\w*)")


def plan_nodes(frame: DataFrame) -> PlanNode:
    """The physical plan Spark would run (adaptive execution's initial plan, exchanges in),
    parsed from its printed tree (over Spark Connect the plan reaches the client as text): each
    level of depth indents three characters; the plan of a cached frame, printed below its
    scan, is left out, as it is not a child."""
    text = frame._explain_string(mode="simple")  # type: ignore[attr-defined]
    lines = text.split("== Physical Plan ==", 1)[1].strip("\n").splitlines()
    root: PlanNode | None = None
    open_nodes: list[tuple[int, PlanNode]] = []
    for line in lines:
        match = PLAN_LINE.match(line)
        if match is None:
            continue
        depth, node = len(match["prefix"]) // 3, PlanNode(match["name"])
        while open_nodes and open_nodes[-1][0] >= depth:
            open_nodes.pop()
        if not open_nodes:
            root = root or node
        elif open_nodes[-1][1].name != "InMemoryTableScan":
            open_nodes[-1][1].children.append(node)
        else:
            continue  # the cached frame's own plan
        open_nodes.append((depth, node))
    assert root is not None, text
    return root.children[0] if root.name == "AdaptiveSparkPlan" else root


def children(node: PlanNode) -> list[PlanNode]:
    return node.children


def names(node: PlanNode, *, broadcasts: bool = True) -> list[str]:
    """The operators of a plan, down to the cached frames it reads (a cached frame's own plan is
    not a child); without ``broadcasts``, not the small side of broadcast joins."""
    if not broadcasts and node.name == "BroadcastExchange":
        return []
    return [node.name, *(n for c in children(node) for n in names(c, broadcasts=broadcasts))]


def windows(node: PlanNode) -> list[PlanNode]:
    found = [node] if node.name == "Window" else []
    return found + [w for c in children(node) for w in windows(c)]


def assert_read_as_clustered(
    spark: SparkSession,
    ledger: DataFrame,
    derive: Callable[[DataFrame], Mapping[str, DataFrame]],
    suite: SuiteFile,
) -> None:
    """On a clean ``ledger`` (persisted here): every anomaly table ``derive`` makes of it is
    empty and none of its windows shuffles, and every query of ``suite`` finds nothing and
    does not shuffle."""
    cached = ledger.persist()
    try:
        for name, table in derive(cached).items():
            assert table.count() == 0, name
            for window in windows(plan_nodes(table)):
                assert "Exchange" not in names(window, broadcasts=False), name
        cached.createOrReplaceTempView("asset")
        for expectation in suite.expectations:
            query = expectation["kwargs"]["unexpected_rows_query"]
            frame = spark.sql(query.replace("{batch}", "asset"))
            assert frame.count() == 0
            assert "Exchange" not in names(plan_nodes(frame)), query
    finally:
        cached.unpersist()


def consumer_frames(
    spark: SparkSession, tmp_path: Path
) -> tuple[DataFrame, DataFrame, DataFrame, DataFrame]:
    """A cached producer ledger of two records, the consumer ledger and the polls over it (a
    processing and an effect of each), and the commits (one of each offset)."""
    classified = spark.createDataFrame(
        [("s1", 0, 0, 0, 0, "k0", 0, None, None), ("s1", 0, 0, 1, 1, "k0", 1, None, None)],
        "session_id string, producer int, partition int, offset bigint, seq bigint, "
        "key string, key_seq bigint, reason string, value_head string",
    )
    ledger = build_ledger(classified, read_history(spark, tmp_path)).persist()
    processed = spark.createDataFrame(
        [
            (
                "r",
                0,
                "c",
                "m",
                1,
                o,
                0,
                o,
                f"s1:0:{o}",
                "s1",
                0,
                o,
                "k0",
                o,
                "applied",
                o + 1,
                100 + o,
                2,
                1,
            )
            for o in (0, 1)
        ],
        from_arrow_schema(PROCESSED_SCHEMA),
    )
    effects = spark.createDataFrame(
        [
            (o + 1, f"s1:0:{o}", "s1", 0, o, 0, o, "k0", o, "ORDER_CREATE", 0, "c", 1, 100 + o)
            for o in (0, 1)
        ],
        ", ".join(f"{LEDGER_NAMES.get(c, c)} {t}" for c, t in EFFECT_COLUMNS.items()),
    )
    commits = spark.createDataFrame(
        [("r", 0, "c", "m", 1, o, "every", 0, o + 1, None, 101 + o) for o in (0, 1)],
        from_arrow_schema(COMMITS_SCHEMA),
    )
    return (
        ledger,
        build_consumer_ledger(ledger, processed, effects, {0: 2}),
        build_polls(ledger, processed),
        commits,
    )


def test_the_consumer_ledger_is_one_shuffle_and_no_window_after_it_shuffles_or_sorts(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Records, processings and effects meet in one exchange and one sort; every window of the
    consumer anomalies reads the cached consumer ledger as it lies (only the key streams whose
    effects are out of order are sorted, on the reorder check's own side), and the consumer
    suite's queries plan neither an exchange nor a sort. The polls (what each consumer saw,
    along another axis: the member's epoch) are one more exchange and two sorts, after which
    their windows and queries read them as they lie too; the commits, a few rows per commit,
    are sorted by time where they are read."""
    ledger, built, built_polls, commits = consumer_frames(spark, tmp_path)
    build = names(plan_nodes(built))
    polls_build = names(plan_nodes(built_polls))
    consumer_ledger, polls = built.persist(), built_polls.persist()
    try:
        assert (build.count("Exchange"), build.count("Sort"), build.count("Window")) == (1, 1, 3)
        assert build.count("InMemoryTableScan") == 1  # the producer ledger, not read again
        assert (polls_build.count("Exchange"), polls_build.count("Sort")) == (1, 2)

        tables = consumer_anomalies.derive(consumer_ledger, polls, commits)
        for name, table in tables.items():
            assert table.count() == 0, name
            if name == "offset_regression":
                continue  # the commits, read as they come
            for window in windows(plan_nodes(table)):
                below = names(window, broadcasts=False)
                assert "Exchange" not in below, (name, below)
                if "Sort" in below:  # only the suspect streams, after their semi-join
                    assert name == "effect_reorder", (name, below)
                    assert below.index("Sort") < below.index("BroadcastHashJoin"), below

        assets = {"consumer_ledger": consumer_ledger, "polls": polls, "commits": commits}
        for suite in load_suites(consumed=True)[len(SUITE_NAMES) :]:
            assets[suite.asset].createOrReplaceTempView("asset")
            for expectation in suite.expectations:
                query = expectation["kwargs"]["unexpected_rows_query"]
                frame = spark.sql(query.replace("{batch}", "asset"))
                assert frame.count() == 0
                if suite.asset == "commits":
                    continue
                operators = names(plan_nodes(frame))
                assert "Exchange" not in operators, (suite.name, operators)
                assert "Sort" not in operators, (suite.name, operators)
    finally:
        consumer_ledger.unpersist()
        polls.unpersist()
        ledger.unpersist()


def write_suite(directory: Path, name: str, content: dict[str, object]) -> Path:
    path = directory / f"{name}.json"
    path.write_text(json.dumps(content))
    return path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"name": "exactly_once", "asset": "ledger", "expectations": []}, "version"),
        (
            {"name": "other", "version": 1, "asset": "ledger", "expectations": []},
            "names suite 'other'",
        ),
        (
            {"name": "exactly_once", "version": "one", "asset": "ledger", "expectations": []},
            "invalid literal",
        ),
        ({"name": "exactly_once", "version": 1, "expectations": []}, "asset"),
        (
            {"name": "exactly_once", "version": 1, "asset": "topic", "expectations": []},
            "asset 'topic' is not one of",
        ),
    ],
)
def test_broken_suite_files_are_refused(
    tmp_path: Path, content: dict[str, object], message: str
) -> None:
    with pytest.raises(SuiteFileError, match=message):
        SuiteFile.load(write_suite(tmp_path, "exactly_once", content))


@pytest.mark.parametrize(
    ("expectation", "message"),
    [
        ({"type": "expect_column_values_to_not_be_null", "kwargs": {}}, "column"),
        ({"type": "expect_nothing_at_all", "kwargs": {}}, "accepted 0 of 1"),
    ],
)
def test_an_expectation_gx_rejects_is_refused(
    tmp_path: Path, expectation: dict[str, object], message: str
) -> None:
    suite = SuiteFile.load(
        write_suite(
            tmp_path,
            "exactly_once",
            {
                "name": "exactly_once",
                "version": 2,
                "asset": "ledger",
                "expectations": [expectation],
            },
        )
    )

    with pytest.raises(SuiteFileError, match=message):
        suite.to_gx()
