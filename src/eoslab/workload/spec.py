"""How much a workload sends, how fast, and with which shape of record."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

DEFAULT_PRODUCER_CONFIG: dict[str, str | int | float | bool] = {
    "enable.idempotence": True,
    "acks": "all",
    "statistics.interval.ms": 1000,
}
"""What every workload producer starts from; a scenario's producer config overrides it."""


class WorkloadSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    producers: int = Field(1, ge=1, le=32, description="producer processes")
    records: int | None = Field(3000, ge=1, description="records over all producers")
    duration_s: float | None = Field(
        None, gt=0, description="stop sending after this long (with or without a record count)"
    )
    rate: float | None = Field(
        None, gt=0, description="records per second over all producers; unset: full speed"
    )
    value_size: int = Field(100, ge=0, le=1_000_000, description="bytes per value, padded")
    keys: int = Field(64, ge=1, le=1_000_000, description="size of the key space")
    flush_timeout_s: float = Field(
        30.0, gt=0, description="how long a session waits for outstanding reports at its end"
    )

    @model_validator(mode="after")
    def _bounded(self) -> Self:
        if self.records is None and self.duration_s is None:
            raise ValueError("records: give a record count, a duration_s, or both")
        return self

    def records_of(self, producer: int) -> int | None:
        """Producer ``producer``'s share of the record count."""
        if self.records is None:
            return None
        share, extra = divmod(self.records, self.producers)
        return share + (1 if producer < extra else 0)

    @property
    def sending_s(self) -> float | None:
        """How long the producers send at their rate, None when it is unbounded (full speed)."""
        paced = None if self.records is None or self.rate is None else self.records / self.rate
        if self.duration_s is None:
            return paced
        return self.duration_s if paced is None else min(paced, self.duration_s)

    @property
    def rate_per_producer(self) -> float | None:
        return None if self.rate is None else self.rate / self.producers
