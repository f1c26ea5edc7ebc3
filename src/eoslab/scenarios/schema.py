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

from eoslab.chaos.timeline import (
    ProducerCrashStep,
    RefbrokerStep,
    RunTarget,
    Step,
)
from eoslab.rundir import ANOMALIES, AnomalyName, Expectation
from eoslab.workload.spec import DEFAULT_PRODUCER_CONFIG, WorkloadSpec

DEFAULT_EXPECTATIONS: dict[str, str] = dict.fromkeys(ANOMALIES, "0") | {"indeterminate": ">=0"}
"""Unless a scenario says otherwise: no anomaly, and indeterminate records are allowed."""

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
    on: dict[RunTarget, Expected] = Field(
        default_factory=dict, description="per-target overrides of anomalies and errors"
    )

    def for_target(self, target: str) -> dict[str, str | dict[str, str]]:
        """run.json's `expected`: every anomaly, defaults filled, target overrides applied."""
        override = self.on.get(target, Expected())
        anomalies = DEFAULT_EXPECTATIONS | self.anomalies | override.anomalies
        errors = self.errors | override.errors
        return {**anomalies, **({"errors": errors} if errors else {})}


class TopicSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    partitions: int = Field(3, ge=1, le=64)


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=40)
    description: str
    targets: list[RunTarget] = Field(min_length=1)
    seed: int = 0
    topic: TopicSpec = Field(default_factory=TopicSpec)
    producer: ScalarConfig = Field(
        default_factory=dict, description="librdkafka properties over the workload defaults"
    )
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    nemesis: list[Step] = Field(default_factory=list)
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
        for index, step in enumerate(self.nemesis):
            where = f"nemesis.{index}"
            applies_to = set(step.on or self.targets)
            if step.on is not None and not applies_to <= set(self.targets):
                raise ValueError(
                    f"{where}.on: {sorted(applies_to - set(self.targets))} not among the scenario's targets"
                )
            if isinstance(step, RefbrokerStep) and applies_to != {"refbroker"}:
                raise ValueError(
                    f"{where}: a refbroker fault needs on: [refbroker] (the scenario also targets kafka)"
                )
            if isinstance(step, ProducerCrashStep) and step.producer >= self.workload.producers:
                raise ValueError(
                    f"{where}.producer: {step.producer}, but the workload has {self.workload.producers} producer(s)"
                )
            partition = getattr(step, "partition", 0)
            if partition >= self.topic.partitions:
                raise ValueError(
                    f"{where}.partition: {partition}, but the topic has {self.topic.partitions} partition(s)"
                )
        return self

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
