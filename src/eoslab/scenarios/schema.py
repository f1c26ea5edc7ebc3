"""The scenario file: targets, topic, producer config, workload, nemesis timeline, and the
verdict it is expected to produce.

Unknown fields are refused everywhere (a typo must not silently become a default), and
librdkafka properties are checked by librdkafka itself.
"""

from __future__ import annotations

from typing import Self

from confluent_kafka import KafkaException, Producer
from kio.schema.errors import ErrorCode
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from eoslab.nemesis.steps import AnyStep
from eoslab.nemesis.steps.base import ScenarioShape
from eoslab.rundir import (
    ERRORS_KEY,
    GROUP_PROTOCOLS,
    AnomalyName,
    Expectation,
    GroupProtocol,
    HandlerMode,
    LabTarget,
    default_expectations,
)
from eoslab.workload.consumer_spec import ConsumerWorkloadSpec
from eoslab.workload.spec import DEFAULT_PRODUCER_CONFIG, WorkloadSpec

RESERVED_PRODUCER_PROPERTIES = frozenset(
    {"bootstrap.servers", "metadata.broker.list", "stats_cb", "error_cb", "on_delivery", "logger"}
)
"""Set by the run itself, never by a scenario."""

ScalarConfig = dict[str, str | int | float | bool]


class Expected(BaseModel):
    model_config = ConfigDict(extra="forbid")

    anomalies: dict[AnomalyName, Expectation] = Field(default_factory=dict)
    errors: dict[str, Expectation] = Field(
        default_factory=dict,
        description="Kafka error names the run is expected to provoke (seen by the client)",
    )

    @field_validator("errors")
    @classmethod
    def _known_errors(cls, errors: dict[str, str]) -> dict[str, str]:
        for name in errors:
            if name.lower() not in ErrorCode.__members__:
                raise ValueError(
                    f"unknown Kafka error {name!r} (use names like OUT_OF_ORDER_SEQUENCE_NUMBER)"
                )
        return {name.upper(): expectation for name, expectation in errors.items()}


class ScenarioExpected(Expected):
    on: dict[LabTarget, Expected] = Field(
        default_factory=dict, description="per-target overrides of anomalies and errors"
    )
    modes: dict[HandlerMode, Expected] = Field(
        default_factory=dict, description="per-handler-mode overrides (the consumer half)"
    )

    def for_run(
        self, target: LabTarget, mode: HandlerMode | None = None
    ) -> dict[str, str | dict[str, str]]:
        """run.json's `expected`: every check, defaults filled (the consumer half's when the run
        has a consumer workload in ``mode``), then the target's and the mode's overrides."""
        layers = [self, self.on.get(target), None if mode is None else self.modes.get(mode)]
        chosen = [layer for layer in layers if layer is not None]
        anomalies = default_expectations(consumed=mode is not None)
        errors: dict[str, str] = {}
        for layer in chosen:
            anomalies |= {str(name): form for name, form in layer.anomalies.items()}
            errors |= layer.errors
        return {**anomalies, **({ERRORS_KEY: errors} if errors else {})}


class TopicSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    partitions: int = Field(3, ge=1, le=64)


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=40)
    description: str
    targets: list[LabTarget] = Field(min_length=1)
    seed: int = 0
    topic: TopicSpec = Field(default_factory=TopicSpec)
    producer: ScalarConfig = Field(
        default_factory=dict, description="librdkafka properties over the workload defaults"
    )
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    consumers: ConsumerWorkloadSpec | None = Field(
        None,
        description="the consumer workload (seed 004): consumers in one group applying the "
        "run's records to a sink",
    )
    modes: list[HandlerMode] = Field(
        default_factory=list,
        description="the handler modes the scenario is meant for (the matrix runs each); "
        "default: the consumer workload's own",
    )
    nemesis: list[AnyStep] = Field(default_factory=list)
    expected: ScenarioExpected = Field(default_factory=ScenarioExpected)
    timeout_s: float = Field(120.0, gt=0, le=3600, description="bound on the whole run")

    @field_validator("producer")
    @classmethod
    def _librdkafka_accepts(cls, producer: ScalarConfig) -> ScalarConfig:
        reserved = sorted(RESERVED_PRODUCER_PROPERTIES & producer.keys())
        if reserved:
            raise ValueError(f"{', '.join(reserved)}: set by the run, not by a scenario")
        check_librdkafka_config(DEFAULT_PRODUCER_CONFIG | producer)
        return producer

    @model_validator(mode="after")
    def _steps_fit(self) -> Self:
        shape = ScenarioShape(
            targets=tuple(self.targets),
            producers=self.workload.producers,
            partitions=self.topic.partitions,
            consumers=0 if self.consumers is None else self.consumers.consumers,
        )
        for index, step in enumerate(self.nemesis):
            if step.on is not None and not set(step.on) <= set(shape.targets):
                extra = sorted(set(step.on) - set(shape.targets))
                raise ValueError(f"nemesis.{index}.on: {extra} not among the scenario's targets")
            misfit = step.misfit(shape)
            if misfit is not None:
                raise ValueError(f"nemesis.{index}.{misfit}")
        if self.modes and self.consumers is None:
            raise ValueError("modes: handler modes need a consumer workload (consumers)")
        if self.consumers is not None and self.consumers.group_protocol == "consumer":
            others = sorted(set(self.targets) - {"kafka4"})
            if others:
                raise ValueError(
                    f"consumers.group_protocol: consumer (KIP-848) is Kafka 4's; not on {others}"
                )
        return self

    @property
    def run_modes(self) -> list[HandlerMode | None]:
        """The modes the matrix runs the scenario in (None: no consumer workload)."""
        if self.modes:
            return list(self.modes)
        return [None if self.consumers is None else self.consumers.mode]

    def group_protocols(self, target: LabTarget) -> list[GroupProtocol]:
        """The consumer group protocols the matrix runs the scenario's consumers in on
        ``target``: both on Kafka 4 (KIP-848's is GA there), the workload's own elsewhere
        (classic: Kafka 3.9 and the reference broker have no other). A scenario without
        consumers has the classic one, which it never uses."""
        if self.consumers is None:
            return ["classic"]
        return list(GROUP_PROTOCOLS) if target == "kafka4" else [self.consumers.group_protocol]

    def consumer_workload(self, mode: HandlerMode | None) -> ConsumerWorkloadSpec | None:
        """The consumer workload of a run in ``mode``: the scenario's in that mode, or, for a
        scenario without one, the default workload in that mode (a producer scenario paired
        with a consumer mode); None runs no consumer (and ``mode`` None keeps the scenario's)."""
        if self.consumers is None:
            return None if mode is None else ConsumerWorkloadSpec(mode=mode)
        return self.consumers if mode is None else self.consumers.model_copy(update={"mode": mode})

    @property
    def producer_config(self) -> ScalarConfig:
        return DEFAULT_PRODUCER_CONFIG | self.producer


def check_librdkafka_config(config: ScalarConfig) -> None:
    """Let librdkafka judge property names and values: it raises naming the property."""
    try:
        producer = Producer({**config, "log_level": 0})
    except KafkaException as error:
        raise ValueError(error.args[0].str()) from None
    except (TypeError, ValueError) as error:
        raise ValueError(str(error)) from None
    del producer
