"""The franz-go driver (services/clients/franz-go): every workload role on franz-go against the
real lab, judged by the real checker — the idempotent producer under lost acknowledgements on
Kafka 4 (issue 29's done-when cell), the transactional producer with read_committed and
read_uncommitted readers, a group consumer in dedup-table mode through a crash between its
effects and its commit (redelivered, never applied twice), and
a transactional copier (franz-go's GroupTransactSession) — a version the Go module proxy does
not have refused in one line with no run started, and librdkafka's properties translated into
kgo options (pure logic)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from eoslab.admin import create_topic
from eoslab.clients import ClientError
from eoslab.rundir import HandlerMode, LabTarget, VerdictStatus
from eoslab.runtime.local import LocalRuntime
from eoslab.scenarios.catalogue import find_scenario, load_scenario
from eoslab.scenarios.executor import execute
from eoslab.settings import runs_root
from eoslab.verify.checker import verify_run
from eoslab.workload.drivers.api import ClientApi
from eoslab.workload.drivers.franz_go import build_tags, failure_line, module_version
from eoslab.workload.drivers.franz_go.config import DriverConfigError, consumer, producer
from eoslab.workload.drivers.registry import check_config, prepare, resolve
from lab_runs import blind_processings

CLIENT = "franz-go:v1.22.2"


# ---------------------------------------------------------------------------------- pure logic
def test_a_producer_config_becomes_kgo_options() -> None:
    native, stats_ms = producer(
        {
            "bootstrap.servers": "127.0.0.1:9092, 127.0.0.1:9093",
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 3000,
            "request.timeout.ms": 2000,
            "socket.timeout.ms": 4000,
            "transactional.id": "t-1",
            "transaction.timeout.ms": 60000,
            "statistics.interval.ms": 1000,
            "stats_cb": print,
            "debug": "eos,protocol",
        }
    )
    assert native == {
        "SeedBrokers": "127.0.0.1:9092, 127.0.0.1:9093",
        "RequiredAcks": "all",
        "ProducerLinger": "5ms",
        "RecordDeliveryTimeout": "3000ms",
        "ProduceRequestTimeout": "2000ms",
        "RequestTimeoutOverhead": "4000ms",
        "TransactionalID": "t-1",
        "TransactionTimeout": "60000ms",
        "WithLogger": "debug",
    }
    assert stats_ms == 1000


def test_idempotence_off_and_acks_1_carry_over() -> None:
    native, _ = producer({"enable.idempotence": False, "acks": 1, "retries": 10})
    assert native == {
        "DisableIdempotentWrite": "true",
        "RequiredAcks": "leader",
        "RecordRetries": "10",
    }


def test_a_consumer_config_becomes_kgo_options() -> None:
    native, _ = consumer(
        {
            "group.id": "g",
            "enable.auto.commit": False,
            "auto.offset.reset": "smallest",
            "isolation.level": "read_committed",
            "session.timeout.ms": 6000,
            "max.poll.interval.ms": 30000,
            "partition.assignment.strategy": "range,roundrobin",
            "enable.partition.eof": True,
        }
    )
    assert native == {
        "ConsumerGroup": "g",
        "DisableAutoCommit": "true",
        "ConsumeResetOffset": "start",
        "FetchIsolationLevel": "read_committed",
        "SessionTimeout": "6000ms",
        "RebalanceTimeout": "30000ms",
        "Balancers": "range,roundrobin",
    }
    assert consumer({"group.protocol": "consumer", "group.remote.assignor": "uniform"})[0] == {
        "ServerSideBalancer": "true",
        "Balancers": "sticky",
    }


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"batch.num.messages": 1}, "batch.num.messages"),
        ({"queue.buffering.max.messages": 10}, "queue.buffering.max.messages"),
        ({"acks": "some"}, "acks"),
        ({"linger.ms": "soon"}, "linger.ms"),
    ],
)
def test_what_franz_go_cannot_do_is_refused_by_name(config: dict[str, object], named: str) -> None:
    with pytest.raises(DriverConfigError, match=rf"^{re.escape(named)}: "):
        producer(config)
    with pytest.raises(ClientError, match=rf"^{re.escape(named)}: "):
        check_config(resolve(CLIENT), config)


def test_a_consumer_property_without_equivalent_is_refused() -> None:
    with pytest.raises(DriverConfigError, match=r"^auto\.offset\.reset: 'error' has no franz-go"):
        consumer({"auto.offset.reset": "error"})
    with pytest.raises(DriverConfigError, match=r"^partition\.assignment\.strategy: "):
        consumer({"partition.assignment.strategy": "sticky-ish"})


def test_module_versions_and_build_tags() -> None:
    assert module_version("1.22.2") == module_version("v1.22.2") == "v1.22.2"
    assert build_tags("v1.22.0") == build_tags("v1.22.2") == "kip848"
    assert build_tags("v1.21.7") == build_tags("v1.20.6") == ""
    line = failure_line(
        "v9.9.9",
        "v9.9.9",
        "go: github.com/twmb/franz-go@v9.9.9: reading https://proxy/@v/v9.9.9.info: 403 Forbidden\n"
        "\tserver response: This module version is not available.",
    )
    assert line == (
        "franz-go:v9.9.9: github.com/twmb/franz-go v9.9.9 is not on the Go module proxy "
        "(or the proxy is not reachable)"
    )
    assert failure_line("v1.22.2", "v1.22.2", "./main.go:3:2: undefined: kgo.Nope\n").endswith(
        "the driver does not compile against v1.22.2: ./main.go:3:2: undefined: kgo.Nope"
    )


# ---------------------------------------------------------------------------------- bad input
def test_a_version_the_proxy_does_not_have_is_one_line_and_no_run(tmp_path: Path) -> None:
    with pytest.raises(ClientError) as refused:
        prepare(resolve("franz-go:v9.9.9"), say=pytest.fail)
    assert str(refused.value) == (
        "franz-go:v9.9.9: github.com/twmb/franz-go v9.9.9 is not on the Go module proxy "
        "(or the proxy is not reachable)"
    )
    before = set(runs_root().glob("*")) if runs_root().is_dir() else set()
    done = subprocess.run(
        [sys.executable, "-m", "eoslab.cli", "run", "baseline", "--client", "franz-go:v9.9.9"],
        env={**os.environ, "EOSLAB_LAB_DIR": str(tmp_path / "no-lab")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert done.stderr.splitlines() == [f"error: {refused.value}"]
    assert (set(runs_root().glob("*")) if runs_root().is_dir() else set()) == before


# ---------------------------------------------------------------------------------- on the lab
@pytest.mark.lab
def test_librdkafkas_debug_property_is_kgos_log_on_the_session_log(
    lab: LocalRuntime, capfd: pytest.CaptureFixture[str]
) -> None:
    """``debug`` (any contexts) turns on kgo's log at debug level on the driver's stderr, which
    is the session's log; without it the driver says nothing there."""
    bootstrap = lab.config.bootstrap("refbroker")
    topic = f"debug-{time.monotonic_ns()}"
    create_topic(bootstrap, topic, 1, 1)
    for debug in ("eos,protocol", None):
        client = ClientApi(prepare(resolve(CLIENT)))
        try:
            config = {"bootstrap.servers": bootstrap, **({"debug": debug} if debug else {})}
            sent = client.producer(config)
            sent.produce(topic, value=b"one", partition=0)
            assert sent.flush(60) == 0
        finally:
            client.close()
        logged = capfd.readouterr().err
        if debug:
            assert "[DEBUG] wrote Produce v" in logged, logged[-2000:]
        else:
            assert "[DEBUG]" not in logged, logged[-2000:]
            assert "[INFO]" not in logged, logged[-2000:]


COPY_SCENARIO = """\
name: franz-go-copy
description: >
  A transactional producer writes the input (one transaction in five aborted); two copiers on
  franz-go (one GroupTransactSession each) copy it read_committed in transactions. No fault.
targets: [kafka, kafka4, refbroker]
workload:
  producers: 1
  records: 300
  rate: 150
  transactions: {records_per_transaction: 20, abort_ratio: 0.2}
  copy: {workers: 2, records_per_transaction: 25}
"""


@pytest.mark.lab
@pytest.mark.parametrize(
    "cell",
    [
        pytest.param(("lost-acks", "kafka4", 1500, None, ""), marks=pytest.mark.kafka4),
        pytest.param(("txn-baseline", "refbroker", 400, None, ""), id="transactions-and-readers"),
        pytest.param(
            ("consumer-crash-before-commit", "refbroker", 800, "dedup-table", "redelivered"),
            id="dedup-table-consumer",
        ),
        pytest.param(("copy", "refbroker", None, None, ""), id="transactional-copier"),
    ],
    ids=lambda cell: str(cell[0]),
)
def test_every_role_on_franz_go_conforms(
    lab: LocalRuntime,
    spark: SparkSession,
    tmp_path: Path,
    cell: tuple[str, LabTarget, int | None, HandlerMode | None, str],
) -> None:
    """A cell: scenario, target, records, handler mode, and the check it is about (observed
    above zero)."""
    name, target, records, mode, subject = cell
    copy = tmp_path / "copy.yaml"
    copy.write_text(COPY_SCENARIO)
    scenario = load_scenario(copy) if name == "copy" else find_scenario(name)
    result = execute(
        scenario,
        target,
        runtime=lab,
        config=lab.config,
        runs_root=tmp_path,
        records=records,
        mode=mode,
        client=CLIENT,
        show_progress=False,
    )
    assert result.invalid_because == []
    assert result.info.client == CLIENT
    assert all(f.took_effect for f in result.info.faults), [f.summary for f in result.info.faults]
    verdict = verify_run(result.run_dir.path, spark=spark)
    reasons = [*verdict.invalid, *(m.summary for m in verdict.mismatches)]
    assert verdict.status is VerdictStatus.CONFORMS, reasons
    observed = {check.name: check.observed for check in verdict.checks}
    assert not subject or observed[subject] > 0, subject
    if mode is not None:  # each fetch partition's high watermark, every processing
        assert blind_processings(result.run_dir) == []
    if result.info.copier is not None:
        assert observed["duplicate_copy"] == observed["lost_copy"] == 0
        assert result.info.copier.committed_offsets  # the copiers committed in transactions
    if result.info.transactions is not None:
        assert all(read.complete for read in result.info.transactions.reads)
