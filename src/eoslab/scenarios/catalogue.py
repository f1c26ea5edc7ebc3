"""Loading scenario files, the built-in catalogue, and errors that say where a file is wrong.

Every error names the file, the field path (``nemesis.2.duration``) and the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from eoslab.nemesis.steps import STEP_KINDS
from eoslab.scenarios.schema import Scenario

CATALOGUE_DIR = Path(__file__).parent / "catalogue"


class ScenarioError(ValueError):
    """A scenario file that cannot be used; one ``file: field: reason`` line per problem."""


def catalogue() -> dict[str, Path]:
    """The built-in scenarios by name."""
    return {path.stem: path for path in sorted(CATALOGUE_DIR.glob("*.yaml"))}


def find_scenario(name_or_path: str) -> Scenario:
    """A catalogue scenario by name, or a scenario file by path."""
    path = catalogue().get(name_or_path)
    if path is None:
        path = Path(name_or_path)
        if not path.is_file():
            known = ", ".join(catalogue())
            raise ScenarioError(
                f"{name_or_path}: no such scenario file or catalogue name ({known})"
            )
    return load_scenario(path)


def load_scenario(path: Path) -> Scenario:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as error:
        raise ScenarioError(f"{path}: cannot read: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise ScenarioError(f"{path}: not valid YAML: {error}") from None
    return parse_scenario(data, str(path))


def parse_scenario(data: Any, source: str) -> Scenario:
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: a scenario is a mapping (name, description, targets, ...)")
    try:
        return Scenario.model_validate(data)
    except ValidationError as error:
        raise ScenarioError("\n".join(_problems(error, source))) from None


def _problems(error: ValidationError, source: str) -> list[str]:
    lines = []
    for detail in error.errors(include_url=False):
        location = _location(detail["loc"])
        message = detail["msg"].removeprefix("Value error, ")
        if detail["type"] in {"union_tag_invalid", "union_tag_not_found"}:
            given = detail["input"].get("kind") if isinstance(detail["input"], dict) else None
            what = "fault" if "fault" in location else "step"
            location = [*location, "kind"]
            message = f"must be one of {_expected_tags(detail)}"
            if given is not None:
                message = f"unknown {what} kind {given!r}; {message}"
        path = ".".join(location)
        lines.append(f"{source}: {path}: {message}" if path else f"{source}: {message}")
    return lines


def _location(loc: tuple[int | str, ...]) -> list[str]:
    """pydantic's location without the union tags it inserts (``nemesis.0.proxy.fault`` →
    ``nemesis.0.fault``)."""
    parts: list[str] = []
    for position, part in enumerate(loc):
        after_index = position > 0 and isinstance(loc[position - 1], int)
        if after_index and part in STEP_KINDS:
            continue
        parts.append(str(part))
    return parts


def _expected_tags(detail: Any) -> str:
    tags = (detail.get("ctx") or {}).get("expected_tags")
    return tags if tags else ", ".join(STEP_KINDS)
