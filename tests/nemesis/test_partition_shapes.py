"""A partition's shapes as groups and links, what the cluster's states say moved, and the
judgement, on a fake lab (pure logic: the real cuts and the real cluster are in
tests/nemesis/test_partition_lab.py and tests/runtime/test_netfaults.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_nemesis import Lab

from eoslab.nemesis.cluster_state import ClusterState, Replicas, changes
from eoslab.nemesis.steps.partition import NetworkPartitionStep, judged
from eoslab.runtime.netfaults import LabNetwork
from eoslab.runtime.topology import LabConfig, kafka_service
from eoslab.scenarios.catalogue import ScenarioError, parse_scenario


def partition(lab: Lab, **spec: Any) -> tuple[list[list[str]], list[str], bool, list[str]]:
    """The step's groups, bridges, one-way flag and links, with kafka-1 leading and kafka-2
    controlling."""
    lab.nemesis.leader_of = lambda partition: "kafka-1"  # type: ignore[method-assign]
    lab.nemesis.controller = lambda: "kafka-2"  # type: ignore[method-assign]
    (step,) = lab.steps("kafka", {"kind": "partition", "at": 0, **spec})
    assert isinstance(step.step, NetworkPartitionStep)
    groups, bridges, one_way = step.step.layout(lab.nemesis, step)
    network = LabNetwork(LabConfig(state_dir=Path("/nonexistent"), targets=("kafka",)))
    links = step.step.links(network, groups, one_way)
    return groups, bridges, one_way, sorted(str(link) for link in links)


def test_isolate_leader_cuts_it_from_every_other_node_both_ways(tmp_path: Path) -> None:
    groups, bridges, one_way, links = partition(Lab(tmp_path, "kafka"), shape="isolate-leader")
    assert (groups, bridges, one_way) == (
        [["kafka-1"], ["kafka-2", "kafka-3", "zookeeper"]],
        [],
        False,
    )
    # nobody connects to ZooKeeper's clients: zookeeper->kafka-1 has no listener to cut
    assert links == [
        "kafka-1->kafka-2",
        "kafka-1->kafka-3",
        "kafka-1->zookeeper",
        "kafka-2->kafka-1",
        "kafka-3->kafka-1",
    ]


def test_isolate_controller_with_its_clients_cut(tmp_path: Path) -> None:
    groups, _, _, links = partition(
        Lab(tmp_path, "kafka"), shape="isolate-controller", clients="cut"
    )
    assert groups[0] == ["kafka-2"]
    assert "proxy->kafka-2" in links
    assert not any(link.startswith("proxy->") and link != "proxy->kafka-2" for link in links)


def test_one_way_cuts_only_what_the_target_sends(tmp_path: Path) -> None:
    _, _, one_way, links = partition(Lab(tmp_path, "kafka"), shape="one-way")
    assert one_way
    assert links == ["kafka-1->kafka-2", "kafka-1->kafka-3", "kafka-1->zookeeper"]


def test_a_bridge_reaches_both_halves_which_cannot_reach_each_other(tmp_path: Path) -> None:
    groups, bridges, _, links = partition(Lab(tmp_path, "kafka"), shape="bridge", target="kafka-3")
    assert bridges == ["kafka-3"]
    assert sorted(n for g in groups for n in g) == ["kafka-1", "kafka-2", "zookeeper"]
    assert not any("kafka-3" in link for link in links)
    assert len(groups) == 2
    assert all(groups)


def test_groups_name_services_and_targets(tmp_path: Path) -> None:
    groups, bridges, _, links = partition(
        Lab(tmp_path, "kafka"), groups=[["leader"], ["zookeeper"]]
    )
    assert (groups, bridges) == ([["kafka-1"], ["zookeeper"]], ["kafka-2", "kafka-3"])
    assert links == ["kafka-1->zookeeper"]
    with pytest.raises(ValueError, match="a node is in two groups"):
        partition(Lab(tmp_path / "twice", "kafka"), groups=[["leader"], ["kafka-1", "zookeeper"]])


@pytest.mark.parametrize(
    ("step", "refusal"),
    [
        ({"shape": "isolate-leader", "groups": [["kafka-1"], ["kafka-2"]]}, "only one-way"),
        ({}, "give a shape or groups"),
        ({"groups": [["kafka-1"]]}, "two groups or more"),
        ({"groups": [["kafka-1"], ["kafka-9"]]}, "unknown node 'kafka-9'"),
        ({"shape": "one-way", "groups": [["kafka-1"], ["kafka-2"], ["kafka-3"]]}, "two groups"),
        (
            {"shape": "isolate-leader", "on": ["refbroker"]},
            "only link inside the lab is to ZooKeeper",
        ),
    ],
)
def test_a_partition_the_lab_cannot_play_is_refused(step: dict[str, Any], refusal: str) -> None:
    with pytest.raises(ScenarioError, match=refusal):
        parse_scenario(
            {
                "name": "cut",
                "description": "d",
                "targets": ["kafka", "refbroker"],
                "nemesis": [{"kind": "partition", "at": 0, **step}],
            },
            "cut",
        )


BEFORE = ClusterState(
    partitions={0: Replicas(1, 4, frozenset({1, 2, 3}), frozenset({1, 2, 3}))},
    live=frozenset({1, 2, 3}),
    controller=2,
    controller_epoch=7,
)


def test_what_moved_is_said_in_the_clusters_words() -> None:
    after = ClusterState(
        partitions={0: Replicas(2, 5, frozenset({2, 3}), frozenset({1, 2, 3}))},
        live=frozenset({2, 3}),
        controller=3,
        controller_epoch=8,
    )
    assert changes(BEFORE, after, kafka_service, kraft=False) == [
        "kafka-1 lost its ZooKeeper session",
        "controller kafka-2 -> kafka-3 (epoch 7 -> 8)",
        "partition 0 leader kafka-1 -> kafka-2 (leader epoch 4 -> 5)",
        "partition 0 ISR [1, 2, 3] -> [2, 3]",
    ]
    assert changes(BEFORE, BEFORE, kafka_service, kraft=False) == []
    assert not BEFORE.whole([1, 2, 3, 4])
    assert BEFORE.whole([1, 2, 3])
    assert not after.whole([2, 3])  # kafka-1 is out of the ISR


def test_a_partition_took_effect_when_the_cluster_noticed_and_recovered() -> None:
    seen = {"partition 0 ISR [1, 2, 3] -> [2, 3]": 10.5}
    assert judged(seen, 2.0, 15.0) == (
        True,
        "partition 0 ISR [1, 2, 3] -> [2, 3] (after 10.5 s); healed after 15.0 s, whole again 2.0 s later",
    )
    assert judged({}, 1.0, 15.0) == (
        False,
        "cut for 15.0 s, and the cluster did not notice (nothing moved)",
    )
    assert not judged(seen, None, 15.0)[0]
    # isolating the controller must replace it: an ISR alone is not that
    assert judged(seen, 2.0, 15.0, ("controller ", "metadata quorum leader ")) == (
        False,
        "partition 0 ISR [1, 2, 3] -> [2, 3] (after 10.5 s); but no controller or metadata "
        "quorum leader moved",
    )


def test_random_halves_split_every_node_by_the_seed(tmp_path: Path) -> None:
    first = partition(Lab(tmp_path / "first", "kafka"), shape="halves")
    again = partition(Lab(tmp_path / "again", "kafka"), shape="halves")
    groups, bridges, one_way, _ = first
    assert first == again  # the same seed draws the same halves
    assert (bridges, one_way) == ([], False)
    assert [len(g) for g in groups] == [2, 2]
    assert sorted(n for g in groups for n in g) == ["kafka-1", "kafka-2", "kafka-3", "zookeeper"]
