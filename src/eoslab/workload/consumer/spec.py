"""What a consumer workload runs: how many consumers, in which handler mode, on which sink."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from eoslab.rundir import GroupProtocol, HandlerMode

DEFAULT_CONSUMER_CONFIG: dict[str, str | int | float | bool] = {
    "auto.offset.reset": "earliest",
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 1000,
    "max.poll.interval.ms": 30000,
    "auto.commit.interval.ms": 500,
}
"""What every consumer starts from; the spec's ``config`` overrides it. The session timeout is
the brokers' minimum (group.min.session.timeout.ms), so a paused consumer is evicted soon;
``auto.commit.interval.ms`` only matters in auto-commit."""

CLASSIC_PROPERTIES = frozenset(
    {"session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"}
)
"""The classic protocol's: under KIP-848 the session and the heartbeat interval are the broker's
(group.consumer.session.timeout.ms, group.consumer.heartbeat.interval.ms; the lab's Kafka 4 sets
them to the classic consumers' 6 s and 1 s) and the broker assigns; librdkafka refuses them."""

RESERVED_CONSUMER_PROPERTIES = frozenset(
    {
        "bootstrap.servers",
        "metadata.broker.list",
        "group.id",
        "group.protocol",
        "enable.auto.commit",
        "on_commit",
        "error_cb",
        "stats_cb",
        "logger",
    }
)
"""Set by the workload itself (the mode decides enable.auto.commit, ``group_protocol``
group.protocol), never by a spec."""


class ConsumerLoop(BaseModel):
    """How every consumer of a workload takes records, commits, and ends."""

    model_config = ConfigDict(extra="forbid")

    batch: int = Field(100, ge=1, le=100_000, description="records per consume() call")
    commit_every: int = Field(100, ge=1, description="records processed between two commits")
    poll_timeout_s: float = Field(0.5, gt=0, description="how long one consume() call waits")
    idle_exit_s: float = Field(
        30.0,
        gt=0,
        description="a consumer with no record and no rebalance this long ends cleanly",
    )
    max_runtime_s: float = Field(900.0, gt=0, description="a consumer is terminated after this")


class ConsumerWorkloadSpec(ConsumerLoop):
    consumers: int = Field(1, ge=1, le=32, description="consumer processes in the group")
    mode: HandlerMode = Field(description="the handler mode of every consumer")
    group_protocol: GroupProtocol = Field(
        "classic", description="the consumer group protocol: classic, or consumer (KIP-848)"
    )
    sink: str | None = Field(
        None, description="a postgresql:// URL or a SQLite file; unset: sink.sqlite in the run"
    )
    group: str | None = Field(None, description="the consumer group; unset: eoslab-<run_id>")
    config: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="librdkafka consumer properties over the defaults"
    )
    crash_after_effects: dict[int, int] = Field(
        default_factory=dict,
        description="consumer -> N: its first session kills itself (-9) after N applied effects",
    )
    freeze_after_effects: dict[int, int] = Field(
        default_factory=dict,
        description="consumer -> N: its first session stops itself (SIGSTOP) after N effects",
    )

    @field_validator("config")
    @classmethod
    def _not_reserved(
        cls, config: dict[str, str | int | float | bool]
    ) -> dict[str, str | int | float | bool]:
        reserved = sorted(RESERVED_CONSUMER_PROPERTIES & set(config))
        if reserved:
            raise ValueError(f"set by the consumer workload itself: {', '.join(reserved)}")
        return config

    @model_validator(mode="after")
    def _fits_the_protocol(self) -> Self:
        classic_only = sorted(CLASSIC_PROPERTIES & set(self.config))
        if self.group_protocol == "consumer" and classic_only:
            raise ValueError(
                f"config: {', '.join(classic_only)} belong to the classic protocol; under "
                "group_protocol consumer (KIP-848) the broker sets them"
            )
        return self

    @property
    def consumer_config(self) -> dict[str, str | int | float | bool]:
        if self.group_protocol == "classic":
            return {**DEFAULT_CONSUMER_CONFIG, **self.config}
        defaults = {k: v for k, v in DEFAULT_CONSUMER_CONFIG.items() if k not in CLASSIC_PROPERTIES}
        return {**defaults, **self.config, "group.protocol": self.group_protocol}
