"""The scenario file: targets, topic, producer config, workload, nemesis timeline, and the
verdict it is expected to produce.

Unknown fields are refused everywhere (a typo must not silently become a default), and
librdkafka properties are checked by librdkafka itself.
"""

from __future__ import annotations

from typing import Literal, Self

from confluent_kafka import KafkaException, Producer
from kio.schema.errors import ErrorCode
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from eoslab.clients import FAMILIES, LIBRDKAFKA, ClientError, parse_client
from eoslab.nemesis.steps import AnyStep
from eoslab.nemesis.steps.base import ScenarioShape
from eoslab.refbroker.producer_state import Rules
from eoslab.rundir import (
    EPOCH_BUMPS,
    ERRORS_KEY,
    FATAL_KEY,
    GROUP_PROTOCOLS,
    HANGING_TRANSACTIONS,
    KAFKA_TARGETS,
    AnomalyName,
    Expectation,
    GroupProtocol,
    HandlerMode,
    LabTarget,
    default_expectations,
)
from eoslab.workload.consumer.spec import ConsumerWorkloadSpec
from eoslab.workload.drivers.librdkafka import installable as installable_librdkafka
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

    epoch_bumps: Expectation | None = Field(
        None,
        description="the producers' epoch bumps (KIP-360: after UNKNOWN_PRODUCER_ID); counted "
        "unless given",
    )
    hanging_transactions: Expectation | None = Field(
        None,
        description="partitions still held by an open transaction when the run ends (a "
        'transactional run: "0" unless given; KAFKA-12671)',
    )
    fatal: dict[str, Expectation] = Field(
        default_factory=dict,
        description="fatal client errors (librdkafka's names) the producer sessions are expected "
        "to end on; a fatal error not named here is a mismatch",
    )

    @field_validator("errors", "fatal")
    @classmethod
    def _known_errors(cls, errors: dict[str, str]) -> dict[str, str]:
        for name in errors:
            if name.lower() not in ErrorCode.__members__ and not name.startswith("_"):
                raise ValueError(
                    f"unknown Kafka error {name!r} (use names like OUT_OF_ORDER_SEQUENCE_NUMBER, "
                    "or librdkafka's local ones like _MSG_TIMED_OUT)"
                )
        return {name.upper(): expectation for name, expectation in errors.items()}


class ScenarioExpected(Expected):
    on: dict[LabTarget, Expected] = Field(
        default_factory=dict, description="per-target overrides of anomalies and errors"
    )
    modes: dict[HandlerMode, Expected] = Field(
        default_factory=dict, description="per-handler-mode overrides (the consumer half)"
    )
    clients: dict[str, Expected] = Field(
        default_factory=dict,
        description="per-client overrides: a client family (``java``: every release of it) or "
        "one release (``java:3.3.1``, ``franz-go:v1.20.6``, ``librdkafka:2.2.0``; a bare version "
        "is librdkafka's), the release's over the family's",
    )

    @field_validator("clients")
    @classmethod
    def _client_names(cls, clients: dict[str, Expected]) -> dict[str, Expected]:
        return {
            name if name in FAMILIES else canonical_client(name): expected
            for name, expected in clients.items()
        }

    def for_run(
        self,
        target: LabTarget,
        mode: HandlerMode | None = None,
        client: str | None = None,
        *,
        transactional: bool = False,
        copied: bool = False,
        as_fixed: bool = False,
    ) -> dict[str, str | dict[str, str]]:
        """run.json's `expected`: every check, defaults filled (the consumer half's when the run
        has a consumer workload in ``mode``, the transactions' when its producers are
        transactional, the copy's when it has a copier stage), then the target's, the mode's
        and the client's overrides — the client's left out ``as_fixed``: what a client without
        the bug a scenario shows must do (``eoslab bisect`` judges every release by it)."""
        family = "librdkafka" if client is None else parse_client(client).family
        layers = [
            self,
            self.on.get(target),
            None if mode is None else self.modes.get(mode),
            None if as_fixed else self.clients.get(family),
            None if client is None or as_fixed else self.clients.get(client),
        ]
        chosen = [layer for layer in layers if layer is not None]
        anomalies = default_expectations(
            consumed=mode is not None, transactional=transactional, copied=copied
        )
        errors: dict[str, str] = {}
        fatal: dict[str, str] = {}
        for layer in chosen:
            anomalies |= {str(name): form for name, form in layer.anomalies.items()}
            errors |= layer.errors
            fatal |= layer.fatal
            if layer.epoch_bumps is not None:
                anomalies[EPOCH_BUMPS] = layer.epoch_bumps
            if layer.hanging_transactions is not None:
                anomalies[HANGING_TRANSACTIONS] = layer.hanging_transactions
        return {
            **anomalies,
            **({ERRORS_KEY: errors} if errors else {}),
            **({FATAL_KEY: fatal} if fatal else {}),
        }


class RefbrokerProfile(BaseModel):
    """The reference broker as the scenario's runs on it need it: set through its control API
    when such a run starts, set back as configured when it ends (runs take turns on the lab)."""

    model_config = ConfigDict(extra="forbid")

    rules: Rules | None = Field(
        None, description="producer-state rule set (kafka-2.0: pre KIP-360)"
    )
    retained_batches: int | None = Field(
        None, ge=1, le=1000, description="batches per producer in the duplicate cache (Kafka: 5)"
    )

    def settings(self) -> dict[str, str | int]:
        """What run.json records: the settings given."""
        return {
            name: str(value) if isinstance(value, Rules) else value
            for name, value in self.model_dump(exclude_none=True).items()
        }

    def faults(self) -> list[dict[str, object]]:
        """The control-API faults that put the broker in this profile."""
        faults: list[dict[str, object]] = []
        if self.rules is not None:
            faults.append({"kind": "rules", "rules": str(self.rules)})
        if self.retained_batches is not None:
            faults.append({"kind": "retained-batches", "count": self.retained_batches})
        return faults


class BugReference(BaseModel):
    """The public bug a scenario shows: where it was reported, and whether the scenario runs the
    software the bug lived in or emulates it (another broker's rules played by the reference
    broker)."""

    model_config = ConfigDict(extra="forbid")

    link: str = Field(pattern=r"^https://", description="the public report")
    reproduced: Literal["in the software", "emulated on the reference broker"]


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
    refbroker: RefbrokerProfile | None = Field(
        None, description="the reference broker's settings for this scenario's runs on it"
    )
    broker_config: dict[LabTarget, ScalarConfig] = Field(
        default_factory=dict,
        description="per Kafka target, dynamic broker configs set on every broker before a "
        "run (IncrementalAlterConfigs) and put back after it, however it ends; e.g. "
        "{kafka: {transaction.partition.verification.enable: false}}",
    )
    clients: list[str] = Field(
        default_factory=list,
        description="clients the full matrix also runs the scenario's roles on, beside the "
        "workload's own librdkafka (``java:3.3.1``, ``franz-go:v1.20.6``, ``librdkafka:2.2.0``; "
        "a bare version is librdkafka's): a client bug shown where it exists, its absence where "
        "it was fixed",
    )

    @field_validator("clients")
    @classmethod
    def _known_clients(cls, clients: list[str]) -> list[str]:
        """Canonical names; a librdkafka release must be one the lab installs (Java and franz-go
        releases are checked against their registries when first built)."""
        names = [canonical_client(name) for name in clients]
        for name in names:
            ref = parse_client(name)
            if ref.family == LIBRDKAFKA and ref.version not in installable_librdkafka():
                known = ", ".join(installable_librdkafka())
                raise ValueError(f"{name}: not a librdkafka release the lab has ({known})")
        return names

    bug: BugReference | None = Field(
        None, description="the public bug the scenario shows, and how (in the software, emulated)"
    )
    every_client: bool = Field(
        True,
        description="the full matrix runs the scenario on every client of the lab; false for a "
        "scenario about one client's behaviour, or whose subject the probe plays",
    )
    negative_control: str | None = Field(
        None,
        pattern=r"^[a-z0-9][a-z0-9-]*(\.[a-z-]+)?$",
        description="for a positive scenario (one that expects no anomaly): the catalogue "
        "scenario, or scenario.mode, that shares its fault and is expected to find what this one "
        "proves absent: the check that could have failed here, failing there",
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
        shape = self.shape(self.workload)
        for index, step in enumerate(self.nemesis):
            if step.on is not None and not set(step.on) <= set(shape.targets):
                extra = sorted(set(step.on) - set(shape.targets))
                raise ValueError(f"nemesis.{index}.on: {extra} not among the scenario's targets")
            misfit = step.misfit(shape) or step.unreachable(shape)
            if misfit is not None:
                raise ValueError(f"nemesis.{index}.{misfit}")
        if self.modes and self.consumers is None:
            raise ValueError("modes: handler modes need a consumer workload (consumers)")
        stray_configs = sorted(set(self.broker_config) - set(KAFKA_TARGETS))
        if stray_configs:
            raise ValueError(
                f"broker_config: {stray_configs} are not Kafka targets (the reference broker's "
                "settings are its own: refbroker:)"
            )
        unused = sorted(set(self.broker_config) - set(self.targets))
        if unused:
            raise ValueError(f"broker_config: {unused} not among the scenario's targets")
        if self.refbroker is not None and "refbroker" not in self.targets:
            raise ValueError("refbroker: a reference-broker profile needs target refbroker")
        stray = sorted(set(self.expected.clients) - set(self.clients) - set(FAMILIES))
        if stray:
            raise ValueError(f"expected.clients: {stray} are not among the scenario's clients")
        if self.consumers is not None and self.consumers.group_protocol == "consumer":
            others = sorted(set(self.targets) - {"kafka4"})
            if others:
                raise ValueError(
                    f"consumers.group_protocol: consumer (KIP-848) is Kafka 4's; not on {others}"
                )
        return self

    def shape(
        self, workload: WorkloadSpec, consumers: ConsumerWorkloadSpec | None = None
    ) -> ScenarioShape:
        """The scenario as its steps see it, for a run with ``workload`` and ``consumers`` (the
        scenario's own, or a run's: another record count, consumers in a handler mode)."""
        consumers = consumers or self.consumers
        return ScenarioShape(
            targets=tuple(self.targets),
            producers=workload.producers,
            partitions=self.topic.partitions,
            consumers=0 if consumers is None else consumers.consumers,
            records=workload.records,
            sending_s=workload.sending_s,
            timeout_s=self.timeout_s,
            transaction_timeout_s=(
                None
                if workload.transactions is None
                else workload.transactions.transaction_timeout_ms / 1000
            ),
        )

    @property
    def run_modes(self) -> list[HandlerMode | None]:
        """The modes the matrix runs the scenario in (None: no consumer workload)."""
        if self.modes:
            return list(self.modes)
        return [None if self.consumers is None else self.consumers.mode]

    def group_protocols(
        self, target: LabTarget, mode: HandlerMode | None = None
    ) -> list[GroupProtocol]:
        """The consumer group protocols the matrix runs the scenario's consumers (in ``mode``,
        or its own) in on ``target``: both on Kafka 4 (KIP-848's is GA there), the workload's
        own elsewhere (classic: Kafka 3.9 and the reference broker have no other). A run
        without consumers has the classic one, which it never uses."""
        consumers = self.consumer_workload(mode)
        if consumers is None:
            return ["classic"]
        return list(GROUP_PROTOCOLS) if target == "kafka4" else [consumers.group_protocol]

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


def canonical_client(name: str) -> str:
    """A client's name as runs and cells say it (``2.2.0`` → ``librdkafka:2.2.0``)."""
    try:
        return str(parse_client(name))
    except ClientError as error:
        raise ValueError(str(error)) from None


def check_librdkafka_config(config: ScalarConfig) -> None:
    """Let librdkafka judge property names and values: it raises naming the property."""
    try:
        producer = Producer({**config, "log_level": 0})
    except KafkaException as error:
        raise ValueError(error.args[0].str()) from None
    except (TypeError, ValueError) as error:
        raise ValueError(str(error)) from None
    del producer
