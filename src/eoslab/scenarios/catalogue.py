"""Loading scenario files, the built-in catalogue, and errors that say where a file is wrong.

Every error names the file, the field path (``nemesis.2.duration``) and the reason, one line
per problem (an unknown name in a mapping's key lists the known ones).

Scenario files are YAML, read with one difference from PyYAML's default: a plain ``on``,
``off``, ``yes`` or ``no`` as a mapping key is that word, not YAML 1.1's boolean (``on:`` names a
step's or an expectation's targets; as a value those words keep their YAML 1.1 meaning).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from eoslab.nemesis.steps import STEP_KINDS
from eoslab.scenarios.schema import Scenario

CATALOGUE_DIR = Path(__file__).parent / "catalogue"
BOOL_TAG = "tag:yaml.org,2002:bool"
STR_TAG = "tag:yaml.org,2002:str"
KEY_TAG = "[key]"
"""Where pydantic's location says that a mapping's key, not its value, is wrong."""
YAML_BOOLEANS = frozenset({"true", "false"})
"""The booleans a key may still be (YAML 1.2's)."""


class ScenarioLoader(yaml.SafeLoader):
    """PyYAML's safe loader, with YAML 1.1's word booleans (``on``, ``off``, ``yes``, ``no``)
    read as strings when they are plain mapping keys (see the module docstring)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        for key, _ in node.value:
            plain = isinstance(key, yaml.ScalarNode) and key.style is None
            if plain and key.tag == BOOL_TAG and key.value.lower() not in YAML_BOOLEANS:
                key.tag = STR_TAG
        return super().construct_mapping(node, deep=deep)


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
        data = yaml.load(path.read_text(), Loader=ScenarioLoader)
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
    problems: list[tuple[str, str]] = []  # (field path, reason)
    # a mapping key that is no known name (an anomaly, a target, a mode): its path -> the known
    # names, gathered over the alternatives pydantic reports one by one
    unknown_keys: dict[str, list[str]] = {}
    for detail in error.errors(include_url=False):
        if KEY_TAG in detail["loc"]:
            path = ".".join(_location(detail["loc"][: detail["loc"].index(KEY_TAG)]))
            if path not in unknown_keys:
                problems.append((path, ""))  # its reason, once every name is known
            known = unknown_keys.setdefault(path, [])
            names = re.findall(r"'([^']*)'", (detail.get("ctx") or {}).get("expected", ""))
            known += [name for name in names if name not in known]
            continue
        location = _location(detail["loc"])
        message = detail["msg"].removeprefix("Value error, ")
        if detail["type"] in {"union_tag_invalid", "union_tag_not_found"}:
            given = detail["input"].get("kind") if isinstance(detail["input"], dict) else None
            what = "fault" if "fault" in location else "step"
            location = [*location, "kind"]
            message = f"must be one of {_expected_tags(detail)}"
            if given is not None:
                message = f"unknown {what} kind {given!r}; {message}"
        problems.append((".".join(location), message))
    lines = []
    for path, message in problems:
        reason = (
            f"unknown name; known names: {', '.join(unknown_keys[path])}"
            if path in unknown_keys
            else message
        )
        lines.append(f"{source}: {path}: {reason}" if path else f"{source}: {reason}")
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
