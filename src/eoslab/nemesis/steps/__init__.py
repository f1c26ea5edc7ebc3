"""The nemesis' step kinds, one file each: a new kind is a new file plus one line here."""

from __future__ import annotations

from typing import Annotated, get_args

from pydantic import Field

from eoslab.nemesis.steps.base import Step
from eoslab.nemesis.steps.consumer_crash import ConsumerCrashStep
from eoslab.nemesis.steps.consumer_join import ConsumerJoinStep
from eoslab.nemesis.steps.consumer_pause import ConsumerPauseStep
from eoslab.nemesis.steps.consumer_seek import ConsumerSeekStep
from eoslab.nemesis.steps.delete_records import DeleteRecordsStep
from eoslab.nemesis.steps.heal import HealStep
from eoslab.nemesis.steps.kill import KillStep
from eoslab.nemesis.steps.link_delay import LinkDelayStep
from eoslab.nemesis.steps.link_loss import LinkLossStep
from eoslab.nemesis.steps.partition import NetworkPartitionStep
from eoslab.nemesis.steps.pause import PauseStep
from eoslab.nemesis.steps.probe import ProbeStep
from eoslab.nemesis.steps.producer_crash import ProducerCrashStep
from eoslab.nemesis.steps.producer_zombie import ProducerZombieStep
from eoslab.nemesis.steps.proxy_fault import ProxyStep
from eoslab.nemesis.steps.refbroker_fault import RefbrokerStep
from eoslab.nemesis.steps.restart import RestartStep
from eoslab.nemesis.steps.rolling_restart import RollingRestartStep
from eoslab.nemesis.steps.transaction_hang import TransactionHangStep

AnyStep = Annotated[
    KillStep
    | PauseStep
    | RestartStep
    | RollingRestartStep
    | ProxyStep
    | RefbrokerStep
    | ProducerCrashStep
    | ProducerZombieStep
    | TransactionHangStep
    | ProbeStep
    | ConsumerCrashStep
    | ConsumerPauseStep
    | ConsumerJoinStep
    | ConsumerSeekStep
    | DeleteRecordsStep
    | NetworkPartitionStep
    | LinkDelayStep
    | LinkLossStep
    | HealStep,
    Field(discriminator="kind"),
]
"""A scenario's nemesis step, told apart by ``kind``."""
STEP_TYPES: tuple[type[Step], ...] = get_args(get_args(AnyStep)[0])
STEP_KINDS: tuple[str, ...] = tuple(
    get_args(step_type.model_fields["kind"].annotation)[0] for step_type in STEP_TYPES
)
