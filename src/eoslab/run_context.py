"""One run as every part of it sees it: handed to the producers, the consumers and the nemesis
(instead of the same arguments to each), made once by the run executor."""

from __future__ import annotations

from dataclasses import dataclass

from eoslab.clients import ClientLaunch
from eoslab.rundir import LabTarget, RunDir, Target


@dataclass(frozen=True)
class RunContext:
    run_id: str
    run_dir: RunDir
    target: Target
    """Where the run goes: a lab target or ``external``."""
    lab_target: LabTarget
    """The lab target whose timeline, services and expectations the run follows (an external
    cluster follows Kafka's)."""
    bootstrap: str
    topic: str
    partitions: int
    seed: int
    client: ClientLaunch | None = None
    """The client every role of the run runs (None: the workload's own librdkafka)."""
