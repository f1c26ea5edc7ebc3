"""The producer side of the consumer tests on the lab's Kafka: the real producer workload writes a
topic to its end."""

from __future__ import annotations

from eoslab.run_context import RunContext
from eoslab.rundir import RunDir
from eoslab.workload.spec import WorkloadSpec
from eoslab.workload.supervisor import Workload

PRODUCER_CONFIG: dict[str, str | int | float | bool] = {"enable.idempotence": True, "acks": "all"}


def run_producers(
    bootstrap: str,
    run_dir: RunDir,
    run_id: str,
    topic: str,
    *,
    records: int,
    partitions: int,
    seed: int,
    wait_s: float,
) -> Workload:
    """The producer workload writes ``records`` (eos1, 16 keys) into ``run_dir``'s history and
    finishes (bounded), every record acknowledged; the finished workload (its sessions)."""
    workload = Workload(
        WorkloadSpec(records=records, keys=16),
        RunContext(
            run_id=run_id,
            run_dir=run_dir,
            target="kafka",
            lab_target="kafka",
            bootstrap=bootstrap,
            topic=topic,
            partitions=partitions,
            seed=seed,
        ),
        PRODUCER_CONFIG,
    )
    workload.start()
    try:
        assert workload.wait(wait_s)
    finally:
        workload.stop()
    assert workload.acked == records
    return workload
