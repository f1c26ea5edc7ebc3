"""The consumer workload on the lab's Kafka 4 under each consumer group protocol: the classic one
and KIP-848's, which the broker confirms it runs, with the member epoch in the ledger."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from confluent_kafka import ConsumerGroupType
from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
from kio.schema.types import GroupId

from eoslab.admin import admin_client, create_topic, end_offsets, group_coordinator
from eoslab.clock import wait_until
from eoslab.probe.client import KafkaProtocolClient
from eoslab.run_context import RunContext
from eoslab.rundir import GroupProtocol, RunDir, message_id, new_run_id
from eoslab.runtime.local import LocalRuntime
from eoslab.runtime.topology import kafka4_service
from eoslab.workload.consumer.spec import ConsumerWorkloadSpec
from eoslab.workload.consumer.workload import ConsumerWorkload
from lab_workloads import run_producers

pytestmark = [pytest.mark.lab, pytest.mark.kafka4]

RECORDS = 900
PARTITIONS = 3
SEED = 11
GROUP_TYPES = {"classic": ConsumerGroupType.CLASSIC, "consumer": ConsumerGroupType.CONSUMER}


def member_epochs(lab: LocalRuntime, group: str) -> dict[str, int]:
    """Member id -> member epoch, as the group's coordinator answers ConsumerGroupDescribe
    (KIP-848's describe; librdkafka's admin client does not show epochs)."""
    coordinator = lab.config.service(
        kafka4_service(group_coordinator(lab.config.kafka4_bootstrap, group))
    )
    with KafkaProtocolClient("127.0.0.1", coordinator.ports["advertised"]) as client:
        response = client.request(
            ConsumerGroupDescribeRequest(
                group_ids=(GroupId(group),), include_authorized_operations=False
            )
        )
    (described,) = response.groups
    return {m.member_id: int(m.member_epoch) for m in described.members}


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_group_consumes_every_record_once_under_each_protocol(
    lab: LocalRuntime, tmp_path: Path, protocol: GroupProtocol
) -> None:
    bootstrap = lab.config.kafka4_bootstrap
    run_id = new_run_id(f"consumers-{protocol}", "kafka4")
    topic = f"eos-{run_id}"
    create_topic(bootstrap, topic, PARTITIONS, 3)
    run_dir = RunDir(tmp_path / run_id).create()
    run_producers(
        bootstrap,
        run_dir,
        run_id,
        topic,
        records=RECORDS,
        partitions=PARTITIONS,
        seed=SEED,
        wait_s=90,
    )
    history = ds.dataset(run_dir.history_dir).to_table().to_pylist()
    produced = {message_id(r["session_id"], r["partition"], r["seq"]) for r in history}
    group = f"eoslab-test-{uuid.uuid4().hex[:8]}"
    workload = ConsumerWorkload(
        ConsumerWorkloadSpec(
            consumers=2,
            mode="dedup-table",
            group=group,
            group_protocol=protocol,
            commit_every=100,
            idle_exit_s=60.0,
        ),
        RunContext(
            run_id=run_id,
            run_dir=run_dir,
            target="kafka4",
            lab_target="kafka4",
            bootstrap=bootstrap,
            topic=topic,
            partitions=PARTITIONS,
            seed=SEED,
        ),
    )
    workload.start()
    try:
        assert workload.wait_settled()
        admin = admin_client(bootstrap)  # held: a collected client never resolves its futures
        described = admin.describe_consumer_groups([group])[group].result(30)
        assert described.type == GROUP_TYPES[protocol]
        assert workload.wait_caught_up(90, end_offsets(bootstrap, topic, PARTITIONS))
        if protocol == "consumer":
            # what each consumer holds (and journals) is the epoch its coordinator gave it
            def agree() -> bool:
                held = {
                    str(workload.progress(c)["member_id"]): int(
                        str(workload.progress(c)["generation"])
                    )
                    for c in range(2)
                }
                return held == member_epochs(lab, group)

            assert wait_until(agree, timeout_s=30)
    finally:
        workload.stop()

    info = workload.info()
    assert info.group_protocol == protocol
    assert ("group.protocol" in info.consumer_config) is (protocol == "consumer")
    processed = ds.dataset(run_dir.processed_dir).to_table().to_pylist()
    commits = ds.dataset(run_dir.commits_dir).to_table().to_pylist()
    assert Counter(r["message_id"] for r in processed) == Counter(produced)
    assert {r["effect"] for r in processed} == {"applied"}
    assert {r["error"] for r in commits} == {None}
    # every processing and every commit carries a membership: a generation, or a member epoch
    assert all(r["member_id"] and r["generation"] >= 1 for r in processed + commits)
