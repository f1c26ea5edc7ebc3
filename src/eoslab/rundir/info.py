"""run.json: what a run was (RunInfo).

Part of the run directory's contract: :mod:`eoslab.rundir`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from eoslab.fault_events import FaultEffect
from eoslab.rundir.consumer import ConsumptionInfo
from eoslab.rundir.copy import CopyInfo
from eoslab.rundir.names import cell_name
from eoslab.rundir.producer import SessionInfo
from eoslab.rundir.targets import LabTarget, Target
from eoslab.rundir.transactions import TransactionsInfo

RUN_FORMAT: Literal[1] = 1
"""run.json's format version."""


class RunInfo(BaseModel):
    """``run.json``: what ran, where, with which producer config, and what was expected."""

    model_config = ConfigDict(extra="forbid")

    format: Literal[1] = RUN_FORMAT
    run_id: str
    scenario: str
    target: Target
    bootstrap: str
    topic: str
    partitions: int
    seed: int
    started_ms: int
    ended_ms: int | None = None
    producer_config: dict[str, str | int | float | bool] = Field(default_factory=dict)
    expected: dict[str, str | dict[str, str]] = Field(default_factory=dict)
    """Anomaly name -> "0" | ">0" | ">=0" | "any"; plus optional "errors": {error name ->
    the same forms}, the broker error codes the run is expected to provoke."""
    sessions: list[SessionInfo] = Field(default_factory=list)
    consumption: ConsumptionInfo | None = None
    """The consumer half, when a consumer workload ran (see the module docstring)."""
    transactions: TransactionsInfo | None = None
    """The transactional producers and the readers, when the producers were transactional."""
    copier: CopyInfo | None = None
    """The copier stage (consume-transform-produce), when one ran."""
    client: str | None = None
    """The client the run's roles ran when it is not the workload's own librdkafka, as
    ``<family>:<version>`` (``java:3.9.2``, ``librdkafka:2.2.0``; part of the cell's name);
    None: the workload's own."""
    librdkafka: str | None = None
    """The librdkafka version the roles ran (None: they ran another client)."""
    client_version: str | None = None
    """What the client ran says its version is, as ``<family>:<version>`` (the driver program's
    own answer, e.g. the kafka-clients jar's; librdkafka's for librdkafka)."""
    broker_version: str | None = None
    """What the target ran (:func:`eoslab.runtime.versions.broker_version`); None: a cluster
    of the user's, or a run from before it was recorded."""
    judged_as: LabTarget | None = None
    """An external run: the lab target whose timeline and expectations it followed (``eoslab
    run --expect-as``, kafka by default); None: a run on the lab's own targets."""
    broker_config: dict[str, str] = Field(default_factory=dict)
    """The Kafka brokers' dynamic configs the scenario set for this run (``broker_config:``),
    put back when it ended; empty: the brokers as the lab started them."""
    broker_profile: dict[str, str | int] = Field(default_factory=dict)
    """The reference broker's settings for this run when the scenario sets them (``rules``,
    ``retained_batches``); empty: the broker as the lab started it."""
    faults: list[FaultEffect] = Field(default_factory=list)
    """Every step of the nemesis timeline, judged: did it take effect (written at the end)."""
    problems: list[str] = Field(default_factory=list)
    """What went wrong carrying out the run (a step that failed, a heal that failed, a
    timeout); a run with problems is invalid."""

    fronting: dict[str, Any] | None = None
    """An external run with proxy faults: the bootstrap of the proxy the run put in front of
    the cluster (``bootstrap``) and its counters when the run ended (``routes``: connections
    and frames per route; ``fronting``: the answers it rewrote, the addresses it handed out);
    None: the clients reached the cluster as it is."""
    broker_errors: dict[str, int] = Field(default_factory=dict)
    """Produce answers the reference broker gave with an error during the run, by name (its
    counters; empty on Kafka): errors a client retried past leave no trace in the history."""

    def log_starts(self) -> dict[int, int]:
        """Where delete-records steps that took effect moved each partition's log start (the
        highest per partition): records acknowledged below it were deleted on purpose."""
        starts: dict[int, int] = {}
        for fault in self.faults:
            if fault.kind == "delete-records" and fault.took_effect:
                for partition, offset in fault.observed.get("log_start", {}).items():
                    starts[int(partition)] = max(starts.get(int(partition), 0), int(offset))
        return starts

    @property
    def epoch_bumps(self) -> int:
        return sum(session.epoch_bumps for session in self.sessions)

    def fatal_sessions(self) -> dict[str, int]:
        """Producer sessions that ended on a fatal error, by its name."""
        counts: dict[str, int] = {}
        for session in self.sessions:
            if session.fatal is not None:
                counts[session.fatal] = counts.get(session.fatal, 0) + 1
        return counts

    @property
    def cell_name(self) -> str:
        """The run's cell as matrices and reports name it (:func:`cell_name`)."""
        consumption = self.consumption
        return cell_name(
            self.scenario,
            None if consumption is None else consumption.mode,
            self.client,
            "classic" if consumption is None else consumption.group_protocol,
        )

    def invalid_because(self) -> list[str]:
        """Why the run does not test what its scenario says: its problems, and every step that
        did not take effect. Empty for a valid run."""
        return [*self.problems, *(f.summary for f in self.faults if not f.took_effect)]
