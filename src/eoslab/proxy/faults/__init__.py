"""The chaos proxy's faults, one file per kind (like the nemesis' steps): what each does to a
frame and how its evidence says it took effect. A new kind is a new file plus one line here.

:mod:`spec` holds what every kind shares (where, when, the frame verdict, the evidence);
:mod:`active` a fault in force; :mod:`table` the per-frame decision.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any, get_args

from pydantic import Field, TypeAdapter, ValidationError

from eoslab.proxy.faults.bandwidth import BandwidthSpec
from eoslab.proxy.faults.blackhole import BlackholeSpec
from eoslab.proxy.faults.delay import DelaySpec
from eoslab.proxy.faults.drop_request import DropRequestSpec
from eoslab.proxy.faults.drop_response import DropResponseSpec
from eoslab.proxy.faults.error import ErrorSpec
from eoslab.proxy.faults.late import LateSpec
from eoslab.proxy.faults.latency import LatencySpec
from eoslab.proxy.faults.reset import ResetSpec
from eoslab.proxy.faults.spec import FaultSpec, FaultSpecError

AnyFaultSpec = Annotated[
    DropRequestSpec
    | DropResponseSpec
    | DelaySpec
    | LatencySpec
    | BandwidthSpec
    | ResetSpec
    | BlackholeSpec
    | ErrorSpec
    | LateSpec,
    Field(discriminator="kind"),
]
FAULT_KINDS: tuple[str, ...] = tuple(
    get_args(kind.model_fields["kind"].annotation)[0]
    for kind in get_args(get_args(AnyFaultSpec)[0])
)
FAULT_SPEC_ADAPTER: TypeAdapter[FaultSpec] = TypeAdapter(AnyFaultSpec)


def parse_fault_spec(data: Any, routes: Collection[str] | None = None) -> FaultSpec:
    """Validate a fault spec (a dict, e.g. parsed JSON or YAML) against the proxy's routes.

    Raises FaultSpecError with one line per problem, each naming its field.
    """
    try:
        return FAULT_SPEC_ADAPTER.validate_python(data, context={"routes": routes})
    except ValidationError as error:
        raise FaultSpecError(describe_validation_error(error)) from None


def describe_validation_error(error: ValidationError) -> str:
    """One "field: problem" line per error, without pydantic's union-tag noise."""
    lines = []
    for detail in error.errors(include_url=False):
        location = [str(part) for part in detail["loc"]]
        if location and location[0] in FAULT_KINDS:
            location = location[1:]
        if detail["type"] in {"union_tag_invalid", "union_tag_not_found"}:
            location = ["kind"]
            message = f"must be one of {', '.join(FAULT_KINDS)}"
            given = detail["input"].get("kind") if isinstance(detail["input"], dict) else None
            if given is not None:
                message = f"unknown fault kind {given!r}; {message}"
        else:
            message = detail["msg"].removeprefix("Value error, ")
        lines.append(f"{'.'.join(location)}: {message}" if location else message)
    return "\n".join(lines)
