"""Great Expectations: load the versioned suites from ``expectations/``, validate the ledgers.

The suites live in the repository as JSON files (``name``, ``version``, ``description``,
``asset``: the checker frame the suite validates, ``ledger`` or ``key_ledger`` (see
:mod:`eoslab.verify.producer.ledger`) or ``log`` (the whole ledger, the records that are not the
run's included: the ``log_integrity`` suite) or ``consumer_ledger``
(:mod:`eoslab.verify.consumer.ledger`: only runs with a consumer workload have it, and the
consumer suites), ``polls`` (what each consumer
saw, :func:`eoslab.verify.consumer.ledger.build_polls`: the ``consumer_polls`` suite's) or
``commits`` (the consumption ledger's commit rows, the ``committed_offsets`` suite's) or ``txn_ledger``
(:mod:`eoslab.verify.transactions.ledger`: only runs with transactional producers have it, and the
``transactions`` suite) or ``copy_ledger`` (:mod:`eoslab.verify.copy.ledger`: only runs with
a copier stage have it, and the ``copy`` suite), and ``expectations``: GX expectation configurations whose
``meta.anomalies`` names the anomaly tables each expectation stands for). Every run gets a
file-backed GX context under ``RUN_DIR/checker/gx/``: the suites, the validation results and the
Data Docs of that run.

The SQL of the suites partitions and orders its windows as its asset is laid out, so GX
validates millions of records without a shuffle of its own. Two things keep it to one pass per
expectation over cached data:

- GX evaluates an ``unexpected_rows_expectation``'s query for its rows (at most 200) and, only
  when they reach that limit, for their count too (:mod:`eoslab.verify.gx_row_count`; GX itself
  always runs both). On a large run every such query is evaluated beforehand, all in one Spark
  job, and its result cached: Spark reads a cached result wherever the same plan recurs, so GX's
  evaluations read the few unexpected rows instead of the whole asset (at 2M records GX took
  12.2 s instead of 14.3 s; at 3,000 records the extra jobs cost more than they save: 7.3 s
  against 5.4 s). The queries are written without ``WITH``: a common table expression is planned
  afresh each time and never matches a cached result.
- GX points one temporary view at the asset of each query; re-pointing a view makes Spark drop
  from its cache everything built on what the view showed before, and the per-key ledger is
  built on the ledger. The suites are validated asset by asset in :data:`VALIDATION_ORDER`, the
  ledger last, so no cached frame is dropped while a later suite still reads it.

Each expectation is also held against the anomaly counts: it must succeed exactly when its
anomalies are absent. A disagreement means the SQL of a suite and the Spark derivation of the
anomalies drifted apart, which is a checker bug, not a property of the system under test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import great_expectations as gx
from great_expectations.data_context.types.base import ProgressBarsConfig
from pyspark.sql import DataFrame

import eoslab.verify.gx_row_count  # noqa: F401  (registers its provider over GX's)
from eoslab.rundir import ExpectationOutcome, GxOutcome, SuiteOutcome
from eoslab.settings import project_root
from eoslab.verify.counting import count_rows
from eoslab.verify.spark_session import made_active

SUITE_NAMES = ("exactly_once", "partition_order", "key_order", "log_integrity")
CONSUMER_SUITE_NAMES = ("consumer_exactly_once", "consumer_polls", "committed_offsets")
TRANSACTION_SUITE_NAMES = ("transactions",)
COPY_SUITE_NAMES = ("copy",)
ASSETS = (
    "log",
    "ledger",
    "key_ledger",
    "consumer_ledger",
    "polls",
    "commits",
    "txn_ledger",
    "copy_ledger",
)
VALIDATION_ORDER = (
    "commits",
    "copy_ledger",
    "txn_ledger",
    "consumer_ledger",
    "polls",
    "key_ledger",
    "ledger",
    "log",
)
"""The order GX validates the assets in: whatever is built on another asset goes before it (the
``log``, the whole ledger with the records that are not the run's, is what every other is built
on)."""
DATASOURCE = "eoslab"
UNEXPECTED_ROWS = "unexpected_rows_expectation"


class SuiteFileError(ValueError):
    """A suite file that is not a valid versioned GX suite."""


def expectations_dir() -> Path:
    """``expectations/`` at the root of the checkout: a folder per half."""
    return project_root() / "expectations"


@dataclass(frozen=True)
class SuiteFile:
    name: str
    version: int
    description: str
    asset: str
    expectations: list[dict[str, Any]]

    @classmethod
    def load(cls, path: Path) -> SuiteFile:
        try:
            data = json.loads(path.read_text())
            suite = cls(
                name=data["name"],
                version=int(data["version"]),
                description=data.get("description", ""),
                asset=data["asset"],
                expectations=list(data["expectations"]),
            )
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise SuiteFileError(f"{path}: {error}") from error
        if suite.name != path.stem:
            raise SuiteFileError(f"{path}: names suite {suite.name!r}, expected {path.stem!r}")
        if suite.asset not in ASSETS:
            raise SuiteFileError(f"{path}: asset {suite.asset!r} is not one of {ASSETS}")
        return suite

    def to_gx(self) -> gx.ExpectationSuite:
        """The GX suite; every expectation must survive (GX raises on some invalid ones and logs
        and drops others)."""
        try:
            suite = gx.ExpectationSuite(
                name=self.name,
                expectations=[dict(e) for e in self.expectations],
                meta={"version": self.version, "description": self.description},
            )
        except ValueError as error:  # pydantic's ValidationError among them
            raise SuiteFileError(f"suite {self.name}: {error}") from error
        if len(suite.expectations) != len(self.expectations):
            raise SuiteFileError(
                f"suite {self.name}: GX accepted {len(suite.expectations)} of "
                f"{len(self.expectations)} expectations (see the GX log for the rejected one)"
            )
        return suite


def load_suites(
    directory: Path | None = None,
    consumed: bool = False,
    transactional: bool = False,
    copied: bool = False,
) -> list[SuiteFile]:
    """The checker's suites, from ``expectations/<half>/<name>.json``: the producer half's, the
    consumer half's too when a consumer workload ran, the transactions' when the producers were
    transactional, the copy's when a copier ran."""
    directory = directory or expectations_dir()
    halves = (
        ("producer", SUITE_NAMES),
        ("consumer", CONSUMER_SUITE_NAMES if consumed else ()),
        ("transactions", TRANSACTION_SUITE_NAMES if transactional else ()),
        ("copy", COPY_SUITE_NAMES if copied else ()),
    )
    return [
        SuiteFile.load(directory / half / f"{name}.json")
        for half, names in halves
        for name in names
    ]


def _unexpected(result: Mapping[str, Any]) -> int | None:
    """How many rows broke an expectation (map expectations count, query ones observe)."""
    for field in ("unexpected_count", "observed_value"):
        value = result.get(field)
        if isinstance(value, int):
            return value
    return None


@contextmanager
def _queries_evaluated_once(
    frames: Mapping[str, DataFrame], suites: list[SuiteFile]
) -> Iterator[None]:
    """Every unexpected-rows query of ``suites`` evaluated against its asset and cached (one
    Spark job for all), for as long as GX validates; then dropped, with their views."""
    results: dict[str, DataFrame] = {}
    views: dict[str, DataFrame] = {}
    for suite in suites:
        view = f"eoslab_gx_{suite.asset}"
        frame = frames[suite.asset]
        if view not in views:
            frame.createOrReplaceTempView(view)
            views[view] = frame
        for number, expectation in enumerate(suite.expectations):
            if expectation.get("type") == UNEXPECTED_ROWS:
                query = expectation["kwargs"]["unexpected_rows_query"].format(batch=view)
                results[f"{suite.name}.{number}"] = frame.sparkSession.sql(query).persist()
    try:
        count_rows(results)
        yield
    finally:
        for result in results.values():
            result.unpersist()
        for view, frame in views.items():
            frame.sparkSession.catalog.dropTempView(view)


def validate(
    frames: Mapping[str, DataFrame],
    checker_dir: Path,
    anomaly_counts: Mapping[str, int],
    suites: list[SuiteFile] | None = None,
    *,
    evaluate_once: bool = False,
) -> GxOutcome:
    """Validate every suite against its asset among ``frames`` (by the names of
    :data:`ASSETS`) in a GX file context under ``checker_dir/gx/`` and build its Data Docs.
    ``suites`` defaults to the checker's, the consumer half's among them when ``frames`` has a
    consumer ledger. ``evaluate_once``: evaluate and cache the unexpected-rows queries first
    (for large runs)."""
    suites = (
        suites
        if suites is not None
        else load_suites(
            consumed="consumer_ledger" in frames,
            transactional="txn_ledger" in frames,
            copied="copy_ledger" in frames,
        )
    )
    # GX points ``tmp_view`` at an asset in the asset's own session, then runs the query on its
    # execution engine's session, the process's active one: with two sessions in a process
    # (a caller's and the one `eoslab verify` makes, say) it read another run's ledger.
    with made_active(next(iter(frames.values())).sparkSession):
        context = gx.get_context(mode="file", project_root_dir=str(checker_dir))
        context.variables.progress_bars = ProgressBarsConfig(globally=False)
        context.variables.save()
        source = context.data_sources.add_spark(
            name=DATASOURCE, persist=False
        )  # the caller persists
        batches = {
            asset: source.add_dataframe_asset(name=asset).add_batch_definition_whole_dataframe(
                f"whole {asset}"
            )
            for asset in sorted({suite.asset for suite in suites})
        }
        definitions = {
            suite.name: context.validation_definitions.add(
                gx.ValidationDefinition(
                    name=f"{suite.name} on {suite.asset}",
                    data=batches[suite.asset],
                    suite=context.suites.add(suite.to_gx()),
                )
            )
            for suite in suites
        }
        in_order = sorted(suites, key=lambda suite: VALIDATION_ORDER.index(suite.asset))
        with _queries_evaluated_once(frames, in_order) if evaluate_once else nullcontext():
            results_by_suite = {
                suite.name: definitions[suite.name].run(
                    batch_parameters={"dataframe": frames[suite.asset]},
                    result_format={"result_format": "BASIC"},
                )
                for suite in in_order
            }
    suite_results = [results_by_suite[suite.name] for suite in suites]
    context.build_data_docs()
    versions = {suite.name: suite.version for suite in suites}
    outcomes: list[ExpectationOutcome] = []
    summary: dict[str, SuiteOutcome] = {}
    for suite_result in suite_results:
        name = suite_result.suite_name
        summary[name] = SuiteOutcome(version=versions[name], success=bool(suite_result.success))
        for result in suite_result.results:
            config = result.expectation_config
            if config is None:
                raise SuiteFileError(f"suite {name}: a result without its expectation")
            meta = config.meta or {}
            anomalies = list(meta.get("anomalies", []))
            success = bool(result.success)
            outcomes.append(
                ExpectationOutcome(
                    suite=name,
                    type=config.type,
                    check=meta.get("check", config.type),
                    success=success,
                    unexpected=_unexpected(result.result or {}),
                    anomalies=anomalies,
                    agrees=success == all(anomaly_counts.get(a, 0) == 0 for a in anomalies),
                )
            )
    return GxOutcome(
        success=all(bool(r.success) for r in suite_results),
        agrees_with_anomalies=all(o.agrees for o in outcomes),
        suites=summary,
        expectations=outcomes,
        data_docs=_data_docs_index(context),
    )


def _data_docs_index(context: Any) -> str | None:
    """The local path of the Data Docs index page."""
    for site in context.get_docs_sites_urls():
        url = site.get("site_url")
        if url and url.startswith("file://"):
            return unquote(urlparse(url).path)
    return None
