"""The lab's Kafka to plant topics in (the SparkSession is the session-wide `spark` fixture)."""

from __future__ import annotations

import pytest

from eoslab.runtime.local import LocalRuntime


@pytest.fixture(scope="session")
def kafka_bootstrap(lab: LocalRuntime) -> str:
    """Kafka through the chaos proxy, as a workload sees it."""
    return lab.config.bootstrap_servers
