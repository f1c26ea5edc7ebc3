"""librdkafka's properties as the franz-go driver names them."""

from __future__ import annotations

from typing import Any


def producer(config: dict[str, Any]) -> tuple[dict[str, str], int]:
    raise NotImplementedError


def consumer(config: dict[str, Any]) -> tuple[dict[str, str], int]:
    raise NotImplementedError
