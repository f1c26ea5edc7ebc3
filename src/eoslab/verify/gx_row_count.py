"""GX's count of an unexpected-rows expectation's rows, on Spark, taken from the rows GX fetched.

GX (1.x) judges an ``unexpected_rows_expectation`` by two metrics, each a Spark query of its own
over the asset: the rows (at most :data:`MAX_RESULT_RECORDS` of them) and their count. On the
warm Spark each is a temporary view, a ``sql`` and a job: about 85 ms at a default-matrix
cell's size, 36 of them for a consumer cell's 18 expectations, 3.1 of the check's 7 s (measured
2026-12-06). Below that limit the rows are every row there is and their number is the count:
:class:`UnexpectedRowsCountFromRows`, registered over GX's provider for Spark when this module
is imported, depends on the rows metric (GX computes it once for both) and queries the count
only when the rows reached the limit. GX's other engines keep GX's own provider's behaviour.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from great_expectations.constants import MAX_RESULT_RECORDS
from great_expectations.execution_engine import SparkDFExecutionEngine
from great_expectations.expectations.metrics.metric_provider import metric_value
from great_expectations.expectations.metrics.query_metrics.query_row_count.unexpected_rows_query_row_count import (
    UnexpectedRowsQueryRowCount,
)
from great_expectations.validator.metric_configuration import MetricConfiguration

ROWS = "unexpected_rows_query.table"
"""GX's metric for an unexpected-rows expectation's rows (at most MAX_RESULT_RECORDS)."""


@contextmanager
def _overwriting_on_purpose() -> Iterator[None]:
    """GX's registry without its warning that a provider is overwritten (every process that
    imports this module would print it)."""
    registry = logging.getLogger("great_expectations.expectations.registry")
    level = registry.level
    registry.setLevel(logging.ERROR)
    try:
        yield
    finally:
        registry.setLevel(level)


with _overwriting_on_purpose():

    class UnexpectedRowsCountFromRows(UnexpectedRowsQueryRowCount):
        """``unexpected_rows_query.row_count`` on Spark: the number of rows GX fetched, counted
        by a query of its own only when they reached GX's limit."""

        @metric_value(engine=SparkDFExecutionEngine)
        def _spark(  # GX passes the provider's class as ``cls``
            cls,  # noqa: N805
            execution_engine: SparkDFExecutionEngine,
            metric_domain_kwargs: dict[str, Any],
            metric_value_kwargs: dict[str, Any],
            metrics: dict[str, Any],
            runtime_configuration: dict[str, Any],
        ) -> int:
            rows = metrics[ROWS]
            if len(rows) < MAX_RESULT_RECORDS:
                return len(rows)
            counted: int = UnexpectedRowsQueryRowCount._spark(
                cls,
                execution_engine,
                metric_domain_kwargs,
                metric_value_kwargs,
                metrics,
                runtime_configuration,
            )
            return counted

        @classmethod
        def _get_evaluation_dependencies(
            cls,
            metric: MetricConfiguration,
            configuration: Any = None,
            execution_engine: Any = None,
            runtime_configuration: dict[str, Any] | None = None,
        ) -> dict[str, MetricConfiguration]:
            dependencies: dict[str, MetricConfiguration] = super()._get_evaluation_dependencies(
                metric, configuration, execution_engine, runtime_configuration
            )
            if isinstance(execution_engine, SparkDFExecutionEngine):
                dependencies[ROWS] = MetricConfiguration(
                    metric_name=ROWS,
                    metric_domain_kwargs=metric.metric_domain_kwargs,
                    metric_value_kwargs=metric.metric_value_kwargs,
                )
            return dependencies
