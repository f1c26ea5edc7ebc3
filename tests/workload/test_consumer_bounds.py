"""Every consumer process ends by itself, even with no cluster to talk to: cleanly when it has
had nothing to read for idle_exit_s, terminated (SIGALRM) after max_runtime_s; either way its
ledger is sealed and the supervisor says how it ended."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from eoslab.run_context import RunContext
from eoslab.rundir import RunDir
from eoslab.workload.consumer.spec import ConsumerWorkloadSpec
from eoslab.workload.consumer.workload import ConsumerWorkload

NOWHERE = "127.0.0.1:9"
"""The discard port: nothing listens, librdkafka keeps retrying."""


def nowhere(tmp_path: Path, **spec: float) -> ConsumerWorkload:
    return ConsumerWorkload(
        ConsumerWorkloadSpec(mode="commit-after", **spec),
        RunContext(
            run_id="run",
            run_dir=RunDir(tmp_path / "run").create(),
            target="kafka",
            lab_target="kafka",
            bootstrap=NOWHERE,
            topic="absent",
            partitions=1,
            seed=0,
        ),
    )


@pytest.mark.parametrize(
    ("bounds", "returncode"),
    [
        ({"idle_exit_s": 1.0}, 0),
        ({"idle_exit_s": 600.0, "max_runtime_s": 1.0}, -signal.SIGALRM),
    ],
)
def test_a_consumer_with_no_cluster_ends_by_itself(
    tmp_path: Path, bounds: dict[str, float], returncode: int
) -> None:
    workload = nowhere(tmp_path, **bounds)
    workload.start()
    try:
        assert workload.wait(timeout_s=60)
    finally:
        workload.stop()
    [session] = workload.sessions
    assert session.ended_ms is not None
    expected = (
        [] if returncode == 0 else [f"consumer 0 session {session.session_id} exited {returncode}"]
    )
    assert workload.failures() == expected
    assert workload.progress(0).get("done", False) is (returncode == 0)
