"""The nemesis' step kinds, one file each: a new kind is a new file plus one line here."""

from __future__ import annotations

from typing import Annotated, get_args

from pydantic import Field

from eoslab.nemesis.steps.kill import KillStep
from eoslab.nemesis.steps.pause import PauseStep
from eoslab.nemesis.steps.probe import ProbeStep
from eoslab.nemesis.steps.producer_crash import ProducerCrashStep
from eoslab.nemesis.steps.proxy_fault import ProxyStep
from eoslab.nemesis.steps.refbroker_fault import RefbrokerStep
from eoslab.nemesis.steps.restart import RestartStep
from eoslab.nemesis.steps.rolling_restart import RollingRestartStep

STEP_TYPES = (
    KillStep,
    PauseStep,
    RestartStep,
    RollingRestartStep,
    ProxyStep,
    RefbrokerStep,
    ProducerCrashStep,
    ProbeStep,
)
AnyStep = Annotated[
    KillStep
    | PauseStep
    | RestartStep
    | RollingRestartStep
    | ProxyStep
    | RefbrokerStep
    | ProducerCrashStep
    | ProbeStep,
    Field(discriminator="kind"),
]
"""A scenario's nemesis step, told apart by ``kind``."""
STEP_KINDS: tuple[str, ...] = tuple(
    get_args(step_type.model_fields["kind"].annotation)[0] for step_type in STEP_TYPES
)
