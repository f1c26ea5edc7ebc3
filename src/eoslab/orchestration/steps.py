"""What the DAGs' tasks do, as plain functions: the DAG files only wire them together.

The lab a task talks to is the one in the task's environment (EOSLAB_LAB_DIR and
EOSLAB_PORT_OFFSET, set by the lab for its Airflow, or by whoever runs `airflow dags test`);
run directories go under EOSLAB_RUNS_DIR (default `runs/`), reports under EOSLAB_REPORTS_DIR
(default `reports/`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from eoslab.admin import metadata_brokers
from eoslab.orchestration.lanes import lane_held
from eoslab.rundir import LabTarget, RunDir, Verdict, group_protocol_of, handler_mode
from eoslab.runtime import get_runtime
from eoslab.runtime.health import port_open
from eoslab.runtime.status import cluster_view
from eoslab.runtime.topology import (
    CLUSTER_TITLES,
    SPARK_CONNECT_SERVICE,
    LabConfig,
    broker_service,
    running_lab_config,
)
from eoslab.scenarios.catalogue import find_scenario, parse_scenario
from eoslab.scenarios.executor import execute
from eoslab.scenarios.schema import Scenario
from eoslab.settings import PORT_OFFSET, BasePort, runs_root

log = logging.getLogger(__name__)
HEALTH_TIMEOUT_S = 10.0


class LabUnhealthyError(RuntimeError):
    """The target the DAG run needs is not reachable: the run would only hang or time out."""


class CheckerOutputError(RuntimeError):
    """The checker left no verdict (its Spark failed), or GX and its anomaly tables disagree."""


def lab_config() -> LabConfig:
    """The running lab, as it was brought up (a DAG's probe diffs play on its targets only)."""
    return running_lab_config()


def check_lab(target: str) -> dict[str, Any]:
    """Fail fast, with the fix, when the target, the chaos proxy or the warm Spark is not
    there."""
    config = lab_config()
    proxy_port = config.port(BasePort.PROXY_CONTROL)
    if not port_open(proxy_port):
        raise LabUnhealthyError(
            f"the chaos proxy's control API on 127.0.0.1:{proxy_port} is closed: the lab in "
            f"{config.state_dir} is not up (start it with `make lab up`; "
            f"{PORT_OFFSET}={config.port_offset})"
        )
    if config.with_spark_connect and not port_open(config.spark_connect_port):
        raise LabUnhealthyError(
            f"the lab's warm Spark (Spark Connect on {config.spark_remote}) is down: the check "
            f"would wait for it; see `eoslab lab logs {SPARK_CONNECT_SERVICE}` and restart it "
            f"with `eoslab lab restart {SPARK_CONNECT_SERVICE}`"
        )
    if target in ("kafka", "kafka4"):
        kafka: LabTarget = "kafka" if target == "kafka" else "kafka4"
        bootstrap = config.bootstrap(kafka)
        expected = config.node_ids(kafka)
        if not expected:
            raise LabUnhealthyError(
                f"the lab in {config.state_dir} does not run {kafka} (its targets: "
                f"{', '.join(config.targets)}); bring it up with --targets {kafka},..."
            )
        brokers = metadata_brokers(bootstrap, timeout_s=HEALTH_TIMEOUT_S)
        if brokers != set(expected):
            first = broker_service(kafka, expected[0])
            raise LabUnhealthyError(
                f"{CLUSTER_TITLES[kafka]} at {bootstrap} shows brokers "
                f"{sorted(brokers)}, expected {expected}; see `eoslab lab status` and "
                f"`eoslab lab logs {first}`"
            )
        return {"target": target, "bootstrap": bootstrap, "brokers": sorted(brokers)}
    view = cluster_view(config.refbroker_bootstrap, timeout_s=HEALTH_TIMEOUT_S)
    if not view.reachable:
        raise LabUnhealthyError(
            f"the reference broker at {config.refbroker_bootstrap} does not answer; "
            "see `eoslab lab status` and `eoslab lab logs refbroker`"
        )
    return {"target": target, "bootstrap": view.bootstrap, "brokers": view.brokers}


def scenario_with(
    name: str, producer_overrides: Mapping[str, Any] | None = None, seed: int | None = None
) -> Scenario:
    """A catalogue scenario with librdkafka overrides and seed, validated like a scenario file."""
    scenario = find_scenario(name)
    if not producer_overrides and seed is None:
        return scenario
    data = scenario.model_dump(mode="json", exclude_defaults=True, by_alias=True)
    data["producer"] = {**scenario.producer, **(producer_overrides or {})}
    if seed is not None:
        data["seed"] = seed
    return parse_scenario(data, f"{name} (with the DAG run's overrides)")


def run_scenario(
    scenario: str,
    target: str,
    *,
    records: int | None = None,
    seed: int | None = None,
    producer_overrides: Mapping[str, Any] | None = None,
    mode: str | None = None,
    client: str | None = None,
    group_protocol: str | None = None,
    runs_dir: str | None = None,
    keep_on: str | None = None,
) -> str:
    """Topic, workload ∥ nemesis, heal (what `eoslab run` does); returns the run directory. A
    run that went wrong or whose faults did not all take effect is checked all the same: its
    verdict says it is invalid, and why. ``keep_on``: a Spark Connect server on which the run's
    topics are then read and kept in its directory (:func:`_keep_for_its_check`) before the
    target's lane is let go."""
    config = lab_config()
    holder = f"{scenario} ({mode or 'its mode'}, {client or 'librdkafka'}, pid {os.getpid()})"
    with lane_held(config.state_dir, [target], holder):
        result = execute(
            scenario_with(scenario, producer_overrides, seed),
            target,
            runtime=get_runtime(config=config),
            config=config,
            runs_root=Path(runs_dir) if runs_dir else runs_root(),
            records=records,
            mode=handler_mode(mode),
            client=client or None,
            group_protocol=group_protocol_of(group_protocol),
            show_progress=False,
        )
        if keep_on is not None:
            _keep_for_its_check(result.run_dir.path, keep_on)
    run_dir = str(result.run_dir.path)
    log.info("run directory: %s", run_dir)
    for fault in result.info.faults:
        log.info("fault %s: %s", fault.summary, "took effect" if fault.took_effect else "NO EFFECT")
    for reason in result.invalid_because:
        log.warning("the run is invalid: %s", reason)
    return run_dir


def _keep_for_its_check(run_dir: Path, remote: str) -> None:
    """The run's topics kept in its directory while its lane is held: the lane's next run may
    fault the target (a broker killed, the proxy holding a route) while a check of this one
    would read them (`make conformance`, 2026-12-07: two checks of reference-broker runs
    failed on "Broker transport failure", the lane two runs on). Where it fails, the check
    reads them, as it would have."""
    from pyspark.errors import PySparkException  # Spark loads with the task, not the DAG file

    from eoslab.verify.checker import keep_run_topics
    from eoslab.verify.topic_reader import TopicGoneError

    try:
        kept = keep_run_topics(run_dir, remote)
    except (KafkaException, TopicGoneError, PySparkException) as error:
        log.warning("the run's topics were not kept (its check reads them): %s", error)
        return
    log.info("kept for its check: %s", ", ".join(kept) or "nothing (kept already)")


class RunNotConformingError(RuntimeError):
    """The checker's verdict: the run does not conform, or is invalid (its task is red, the
    next ones run)."""


def check_run(run_dir: str, remote: str | None) -> dict[str, Any]:
    """The checker on the Spark Connect server ``remote`` (None: the lab's warm Spark when up,
    else a Spark of the task's own); fails when the run does not conform."""
    from eoslab.verify.checker import verify_run  # Spark loads with the task, not the DAG file

    verdict = verify_run(Path(run_dir), remote=remote)
    log.info("checked %s: GX data docs %s", verdict.run_id, verdict.links.data_docs)
    if not verdict.conforms:
        raise RunNotConformingError(
            f"{verdict.run_id} {verdict.status}: "
            + "; ".join([*verdict.invalid, *(m.summary for m in verdict.mismatches)])
        )
    return {"run_id": verdict.run_id, "conforms": verdict.conforms}


def read_verdict(run_dir: str) -> Verdict:
    run = RunDir(Path(run_dir))
    if not run.verdict_json.is_file():
        raise CheckerOutputError(
            f"no verdict in {run.verdict_json}: the checker did not finish for {run_dir}"
        )
    return run.read_verdict()


def publish_gx(run_dir: str) -> dict[str, Any]:
    """Log the Great Expectations results the checker recorded (the suites ran inside the
    Spark job, on its DataFrames) and return their summary; fails when the suites disagree
    with the anomaly tables, which is a checker bug."""
    gx = read_verdict(run_dir).gx
    for name, suite in gx.suites.items():
        log.info(
            "GX suite %s v%s: %s", name, suite.version, "passed" if suite.success else "failed"
        )
    log.info("Data Docs: %s", gx.data_docs)
    if not gx.agrees_with_anomalies:
        disagreeing = [e.check for e in gx.expectations if not e.agrees]
        raise CheckerOutputError(
            f"GX and the anomaly tables disagree on {disagreeing} in {run_dir}"
        )
    return {
        "success": gx.success,
        "suites": {name: suite.model_dump() for name, suite in gx.suites.items()},
        "data_docs": gx.data_docs,
    }


def publish_verdict(run_dir: str) -> dict[str, Any]:
    """Log each check (expected against observed) and return the verdict's headline."""
    verdict = read_verdict(run_dir)
    for check in verdict.checks:
        log.info(
            "%-16s expected %-4s observed %6d  %s",
            check.name,
            check.expected,
            check.observed,
            "ok" if check.conforms else "MISMATCH",
        )
    for fault in verdict.faults:
        log.info("fault %s: %s", fault.summary, "took effect" if fault.took_effect else "NO EFFECT")
    return {
        "run_dir": run_dir,
        "run_id": verdict.run_id,
        "status": str(verdict.status),
        "conforms": verdict.conforms,
        "invalid": verdict.invalid,
        "mismatches": [m.name for m in verdict.mismatches],
    }
