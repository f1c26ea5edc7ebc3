"""Kafka's topic-name rules (org.apache.kafka.common.internals.Topic.validate).

Names become directory names in the log, so nothing else may pass: this also keeps
'../x' and friends out of the data directory.
"""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_error(name: str | None) -> str | None:
    """Why `name` is not a legal topic name, or None when it is."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL.fullmatch(name):
        return f"Topic name {name!r} is illegal, it contains a character other than [a-zA-Z0-9._-]"
    return None
