"""How much a workload sends, how fast, and with which shape of record."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from eoslab.rundir import Isolation

DEFAULT_PRODUCER_CONFIG: dict[str, str | int | float | bool] = {
    "enable.idempotence": True,
    "acks": "all",
    "statistics.interval.ms": 1000,
}
"""What every workload producer starts from; a scenario's producer config overrides it."""


class TransactionSpec(BaseModel):
    """Transactional producers (issue 21): each producer gets a ``transactional.id`` of its own
    (kept across its restarts, so a restart fences the session before it) and sends its records
    in transactions of ``records_per_transaction``, each committed or, with the seeded
    probability ``abort_ratio``, aborted (its records flushed into the log first, so an aborted
    transaction's records are really there for a reader to wrongly see)."""

    model_config = ConfigDict(extra="forbid")

    records_per_transaction: int = Field(10, ge=1, le=10_000)
    abort_ratio: float = Field(0.3, ge=0.0, le=1.0)
    transaction_timeout_ms: int = Field(
        10_000, ge=1000, le=900_000, description="transaction.timeout.ms of every producer"
    )
    isolation: Isolation = Field(
        "read_committed",
        description="the isolation level of the consumer under test, whose read the checks "
        "judge (read_uncommitted: the negative control)",
    )
    call_timeout_s: float = Field(
        30.0, gt=0, description="bound on init_transactions, commit and abort (each try)"
    )


class CopySpec(BaseModel):
    """The copier stage (consume-transform-produce, issue 21): ``workers`` processes in one
    consumer group read the run's topic read_committed and copy it to ``<topic>.copy``, each
    batch of up to ``records_per_transaction`` records in one transaction with the consumer's
    offsets (``send_offsets_to_transaction``). ``transactional`` false is the at-least-once
    copier of the negative control: copies produced and flushed, then the offsets committed
    apart. ``crash_after_batches``: worker -> N, its first session kills itself (-9) once its
    N-th batch is produced and flushed, before the batch's commit; a new session takes over."""

    model_config = ConfigDict(extra="forbid")

    workers: int = Field(2, ge=1, le=16, description="copier processes in the copier group")
    records_per_transaction: int = Field(20, ge=1, le=10_000)
    transactional: bool = Field(
        True, description="false: produce, flush, then commit offsets (at least once)"
    )
    crash_after_batches: dict[int, int] = Field(
        default_factory=dict,
        description="worker -> N: its first session kills itself after producing batch N",
    )
    call_timeout_s: float = Field(
        10.0, gt=0, description="bound on init_transactions, commit, abort, send_offsets"
    )
    finish_timeout_s: float = Field(
        60.0, gt=0, description="how long the copiers may take to copy to the end when asked"
    )

    @model_validator(mode="after")
    def _crashes_fit(self) -> Self:
        for worker, batches in self.crash_after_batches.items():
            if not 0 <= worker < self.workers:
                raise ValueError(
                    f"crash_after_batches: worker {worker}, but the copier has {self.workers} "
                    "worker(s)"
                )
            if batches < 1:
                raise ValueError(f"crash_after_batches: worker {worker}: {batches} is not >= 1")
        return self


class WorkloadSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

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
    transactions: TransactionSpec | None = Field(
        None, description="transactional producers; unset: idempotent producers"
    )
    copy_stage: CopySpec | None = Field(
        None,
        alias="copy",
        description="a copier stage copying the run's topic (needs transactions)",
    )

    @model_validator(mode="after")
    def _bounded(self) -> Self:
        if self.records is None and self.duration_s is None:
            raise ValueError("records: give a record count, a duration_s, or both")
        if self.copy_stage is not None and self.transactions is None:
            raise ValueError(
                "copy: the copier checks its input against the transaction ledger; it needs "
                "transactional producers (workload.transactions)"
            )
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
