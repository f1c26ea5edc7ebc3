"""The lab's warm Spark: a Spark Connect server started and watched like the other services,
on loopback only, yielding the CPU to the runs, found by the checker by itself, and still
serving after a client's bad query.
(The checks through it are the checker's own tests: their `spark` session is on it.)"""

from __future__ import annotations

import gc
from pathlib import Path

import psutil
import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql.connect.client.reattach import ExecutePlanResponseReattachableIterator

from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.spark import CHECKS_NICENESS
from eoslab.runtime.topology import Kind
from eoslab.settings import LAB_DIR, PORT_OFFSET, SPARK_REMOTE, WITH_SPARK_CONNECT
from eoslab.verify.spark_session import build_session, default_remote


def test_the_warm_spark_is_a_healthy_lab_service_on_loopback(lab: LocalRuntime) -> None:
    (service,) = [s for s in lab.status().services if s.kind == Kind.SPARK_CONNECT]
    assert service.healthy
    assert service.ports == {"grpc": lab.config.spark_connect_port}
    assert service.pid is not None
    server = psutil.Process(service.pid)
    pids = {server.pid, *(child.pid for child in server.children(recursive=True))}
    listening = [
        c
        for c in psutil.net_connections("inet")
        if c.pid in pids and c.status == psutil.CONN_LISTEN
    ]
    assert lab.config.spark_connect_port in {c.laddr.port for c in listening}
    assert {c.laddr.ip for c in listening} <= {"127.0.0.1", "::ffff:127.0.0.1"}, listening
    # its checks take the CPU the runs of other lanes leave (the JVM that serves them included)
    assert {psutil.Process(pid).nice() for pid in pids} == {CHECKS_NICENESS}


def test_the_checker_finds_the_warm_spark_by_itself(
    lab: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LAB_DIR, str(lab.config.state_dir))
    monkeypatch.setenv(PORT_OFFSET, str(lab.config.port_offset))
    monkeypatch.delenv(SPARK_REMOTE, raising=False)
    assert default_remote() == lab.config.spark_remote

    monkeypatch.setenv(SPARK_REMOTE, "sc://spark.example:15002")
    assert default_remote() == "sc://spark.example:15002"  # a cluster's, when the user says so

    monkeypatch.delenv(SPARK_REMOTE)
    monkeypatch.setenv(WITH_SPARK_CONNECT, "0")
    assert default_remote() is None  # a lab without it: the checker starts a Spark of its own


def test_a_bad_query_fails_its_client_and_the_server_serves_on(
    lab: LocalRuntime, spark: SparkSession, tmp_path: Path
) -> None:
    with pytest.raises(AnalysisException, match="PATH_NOT_FOUND"):
        spark.read.parquet(str(tmp_path / "no-such-table")).count()

    other = build_session(remote=lab.config.spark_remote)
    try:
        assert other.range(10).count() == 10
    finally:
        other.stop()
    assert spark.range(3).count() == 3


def test_a_session_closed_beside_another_leaves_the_others_queries_running(
    lab: LocalRuntime, spark: SparkSession
) -> None:
    """A check that stops its session (``eoslab verify`` in-process, a lane's check) or a session
    the garbage collector closes, while the tests' session is taking the pool its executions
    release through: that pool must still take work (pyspark 4.0.0 shut it down for all)."""
    pool = ExecutePlanResponseReattachableIterator._get_or_create_release_thread_pool()
    other = build_session(remote=lab.config.spark_remote)
    assert other.range(5).count() == 5
    other.stop()
    del other
    gc.collect()  # a session's __del__ closes its client again
    pool.submit(int).result(timeout=10)  # raised "cannot schedule new futures after shutdown"
    assert spark.range(7).count() == 7
