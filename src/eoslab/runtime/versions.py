"""What each lab target runs, as a run records it (run.json ``broker_version``) and the nightly
page lists it: the Kafka release pinned in the target's pom (what `make setup` fetched), or the
reference broker with the rule set it judged the run by."""

from __future__ import annotations

import re

from eoslab.rundir import LabTarget
from eoslab.settings import project_root

KAFKA_VERSION = re.compile(r"<kafka\.version>([^<]+)</kafka\.version>")
POMS: dict[str, tuple[str, str]] = {
    "kafka": ("services/kafka/pom.xml", "ZooKeeper"),
    "kafka4": ("services/kafka4/pom.xml", "KRaft"),
}
DEFAULT_RULES = "kafka-3.9"
"""The reference broker's rule set when a scenario names none (`serve --rules`' default)."""


def broker_version(target: LabTarget, rules: str | None = None) -> str:
    """``Kafka 3.9.2 (ZooKeeper)``, ``Kafka 4.4.0 (KRaft)``, or ``reference broker, kafka-3.9
    rules``."""
    if target not in POMS:
        return f"reference broker, {rules or DEFAULT_RULES} rules"
    pom, metadata = POMS[target]
    found = KAFKA_VERSION.search((project_root() / pom).read_text())
    release = found.group(1) if found else "(version not in its pom)"
    return f"Kafka {release} ({metadata})"
