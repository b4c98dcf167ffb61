"""Kafka's rules for topic names (``org.apache.kafka.common.internals.Topic.validate``)."""

from __future__ import annotations

import re

_LEGAL = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def topic_error(name: str | None) -> str | None:
    """Why ``name`` cannot be a Kafka topic name, or None."""
    if not name:
        return "the topic name is empty"
    if name in (".", ".."):
        return f"topic name {name!r} is not allowed"
    if not _LEGAL.fullmatch(name):
        return f"topic name {name!r} is not 1-249 characters of [a-zA-Z0-9._-]"
    return None
