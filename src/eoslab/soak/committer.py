"""A committing consumer group beside the crash cycles: one librdkafka consumer in a group
reads the witness topic and commits synchronously after every batch it consumed; each commit
the broker acknowledged is remembered, so that after a kill -9 and restart the broker's
committed offset can be held against it (committed offsets never go backwards)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaException, TopicPartition

from eoslab.admin import committed_offsets
from eoslab.background import Background
from eoslab.clock import wait_until
from eoslab.soak.witness import WITNESS_TOPIC

GROUP = "soak-committer"
CONSUMER_CONFIG: dict[str, str | int | float | bool] = {
    "group.id": GROUP,
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "session.timeout.ms": 6000,
    "reconnect.backoff.ms": 20,
    "reconnect.backoff.max.ms": 200,
    "log_level": 0,  # the outages are the point
}
BATCH = 100
POLL_S = 0.2
ERRORS_FOR_S = 15.0
"""How long a coordinator may answer the committed offset with an error (one still loading
after a restart, or moving) before the read fails."""


def committed_offset(bootstrap: str) -> int:
    """The group's committed offset of the witness partition, as its coordinator has it now
    (asked without joining the group: any cluster, wherever the coordinator moved); -1001
    (librdkafka's "invalid") when it has none. Asked again while the coordinator answers with an
    error, for :data:`ERRORS_FOR_S` (then its last error is raised)."""
    errors: list[KafkaException] = []

    def answered() -> tuple[int] | None:
        try:
            return (
                committed_offsets(bootstrap, GROUP, WITNESS_TOPIC, 1, 30.0).get(0, OFFSET_INVALID),
            )
        except KafkaException as error:
            errors.append(error)
            return None

    found = wait_until(answered, ERRORS_FOR_S, interval_s=0.5)
    if found is None:
        raise errors[-1]
    return found[0]


NOTHING_ACKNOWLEDGED = -1
""":meth:`Committer.acknowledged` before the broker acknowledged any commit."""


def went_back(acknowledged: int, read: int) -> bool:
    """Whether a committed offset read after a restart is behind the highest commit acknowledged
    before it (``acknowledged``): never when none was (a group without a commit reads -1001)."""
    return acknowledged != NOTHING_ACKNOWLEDGED and read < acknowledged


@dataclass
class Committer(Background):
    bootstrap: str
    commits: int = 0
    failed_commits: int = 0
    consumed: int = 0
    highest_commit: int = NOTHING_ACKNOWLEDGED
    """The highest offset a commit the broker acknowledged carried."""
    went_backwards: int = 0
    """Acknowledged commits lower than an earlier acknowledged one."""
    errors: list[str] = field(default_factory=list)

    thread_name: ClassVar[str] = "soak-committer"
    join_timeout_s: ClassVar[float | None] = 60.0

    def acknowledged(self) -> int:
        with self._lock:
            return self.highest_commit

    def acknowledged_commits(self) -> int:
        with self._lock:
            return self.commits

    def _run(self) -> None:
        consumer = Consumer({**CONSUMER_CONFIG, "bootstrap.servers": self.bootstrap})
        consumer.subscribe([WITNESS_TOPIC])
        try:
            while not self._stop.is_set():
                messages = consumer.consume(BATCH, POLL_S)
                records = [m for m in messages if m.error() is None]
                if not records:
                    continue
                self.consumed += len(records)
                offset = max(int(m.offset() or 0) for m in records) + 1
                try:
                    consumer.commit(
                        offsets=[TopicPartition(WITNESS_TOPIC, 0, offset)], asynchronous=False
                    )
                except KafkaException as failed:  # the broker is down or the group rebalancing
                    self.failed_commits += 1
                    if len(self.errors) < 5:
                        self.errors.append(str(failed.args[0]))
                    continue
                with self._lock:
                    self.commits += 1
                    if offset < self.highest_commit:
                        self.went_backwards += 1
                    self.highest_commit = max(self.highest_commit, offset)
        finally:
            consumer.close()

    def figures(self) -> dict[str, object]:
        return {
            "group": GROUP,
            "consumed": self.consumed,
            "acknowledged_commits": self.commits,
            "failed_commits": self.failed_commits,
            "highest_commit": self.highest_commit,
            "acknowledged_commits_lower_than_an_earlier_one": self.went_backwards,
            "first_errors": self.errors,
        }
