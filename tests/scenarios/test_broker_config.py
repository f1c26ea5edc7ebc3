"""A scenario's dynamic broker configs (``broker_config:``): set on every broker of the target
before the run, recorded in run.json, put back when it ends; a config the brokers do not know,
or read at start only, is refused before anything is set."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from eoslab.admin import in_effect
from eoslab.runtime.local import LocalRuntime
from eoslab.scenarios.catalogue import find_scenario
from eoslab.scenarios.executor import RunError, finish, plan, play, start

pytestmark = pytest.mark.lab

VERIFICATION = "transaction.partition.verification.enable"


def on_every_broker(bootstrap: str, name: str) -> set[str]:
    client = AdminClient({"bootstrap.servers": bootstrap})
    brokers = client.list_topics(timeout=10).brokers
    values = set()
    for broker in brokers:
        (future,) = client.describe_configs(
            [ConfigResource(ResourceType.BROKER, str(broker))]
        ).values()
        values.add(future.result(10)[name].value)
    return values


def test_a_scenarios_broker_config_holds_for_the_run_and_is_put_back(
    lab: LocalRuntime, tmp_path: Path
) -> None:
    scenario = find_scenario("baseline").model_copy(
        update={"broker_config": {"kafka": {VERIFICATION: False}}}
    )
    bootstrap = lab.config.bootstrap("kafka")
    assert on_every_broker(bootstrap, VERIFICATION) == {"true"}
    run = start(
        plan(scenario, "kafka", records=10), runtime=lab, config=lab.config, runs_root=tmp_path
    )
    problems: list[str] = []
    try:
        assert on_every_broker(bootstrap, VERIFICATION) == {"false"}
        assert run.context.run_dir.read_info().broker_config == {VERIFICATION: "false"}
        problems = play(run, show_progress=False)
    finally:
        result = finish(run, problems)
    assert result.problems == []
    assert result.info.broker_config == {VERIFICATION: "false"}
    assert on_every_broker(bootstrap, VERIFICATION) == {"true"}


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"no.such.config": 1}, "broker config no.such.config: unknown to this cluster"),
        ({"zookeeper.session.timeout.ms": 9000}, "zookeeper.session.timeout.ms: not dynamic"),
    ],
)
def test_a_broker_config_the_run_cannot_set_is_refused_before_anything_is_set(
    lab: LocalRuntime, tmp_path: Path, config: dict[str, object], problem: str
) -> None:
    scenario = find_scenario("baseline").model_copy(
        update={"broker_config": {"kafka": {VERIFICATION: False, **config}}}
    )
    with pytest.raises(RunError, match=problem):
        start(
            plan(scenario, "kafka", records=10), runtime=lab, config=lab.config, runs_root=tmp_path
        )
    assert on_every_broker(lab.config.bootstrap("kafka"), VERIFICATION) == {"true"}


DYNAMIC = ConfigSource.DYNAMIC_BROKER_CONFIG.value  # as DescribeConfigs gives it: a number
STATIC = ConfigSource.STATIC_BROKER_CONFIG.value


@pytest.mark.parametrize(
    ("value", "source", "change", "expected"),
    [
        ("false", DYNAMIC, ("false", True), True),
        ("true", STATIC, ("false", True), False),  # the change not yet applied
        ("true", DYNAMIC, ("false", True), False),  # an earlier dynamic value still there
        ("true", STATIC, (None, False), True),  # deleted: back to the broker's own
        ("false", DYNAMIC, (None, False), False),  # the deletion not yet applied
        ("true", ConfigSource.DYNAMIC_BROKER_CONFIG, ("true", True), True),
    ],
)
def test_a_config_change_is_in_effect_once_the_broker_describes_it(
    value: str, source: int | ConfigSource, change: tuple[str | None, bool], expected: bool
) -> None:
    entry = ConfigEntry(VERIFICATION, value)
    entry.source = source  # type: ignore[assignment]  # a number, as DescribeConfigs gives it
    assert in_effect({VERIFICATION: entry}, {VERIFICATION: change}) is expected
