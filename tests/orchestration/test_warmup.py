"""The warm Spark's warm-up: a real check of a generated clean run on the lab's Spark Connect
server, leaving no topic behind."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from eoslab.clock import wait_until
from eoslab.orchestration.warmup import warm_up
from eoslab.runtime.local import LocalRuntime


def test_the_warm_up_checks_a_clean_run_and_deletes_its_topic(lab: LocalRuntime) -> None:
    bootstrap = lab.config.bootstrap_servers
    verdict = warm_up(bootstrap, lab.config.spark_remote, records=600)
    assert verdict.conforms
    assert verdict.scenario == "warm-up"
    observed = {check.name: check.observed for check in verdict.checks}
    assert observed["lost"] == observed["duplicate"] == 0

    def no_warm_up_topic() -> bool:
        topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
        return not [t for t in topics if verdict.run_id in t]

    assert wait_until(no_warm_up_topic, 30)
