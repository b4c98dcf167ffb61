"""A scripted handler for scenarios: fail chosen records a number of times, or at a seeded rate.

A record is named by where it was first consumed (``retry.original.partition`` / ``offset``), so a rule
keeps following a record through its redeliveries. Errors are named (``TimeoutError``,
``SerializationError``): ``error_class(name)`` is one exception class per name, so a policy's retryable
errors are the classes of the names it lists.

Determinism: whether a delivery fails at the rate depends only on (seed, partition, offset, attempt),
never on the order deliveries happen in.
"""

from __future__ import annotations

import random
import re

import attrs

from minibroker.retry import headers as h

ERROR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_CLASSES: dict[str, type[Exception]] = {}


class HandlerError(Exception):
    """The base of every named error a scripted handler raises."""


def error_class(name: str) -> type[Exception]:
    """The exception class named ``name`` (one per name, made on first use)."""
    if not ERROR_NAME.fullmatch(name):
        raise ValueError(f"expected an error name like TimeoutError, got {name!r}")
    if name not in _CLASSES:
        _CLASSES[name] = type(name, (HandlerError,), {"__module__": __name__})
    return _CLASSES[name]


@attrs.frozen
class FailRule:
    """The record first consumed at ``partition``/``offset`` fails its first ``times`` deliveries
    (None: every delivery), raising ``error``."""

    partition: int
    offset: int
    times: int | None = None
    error: str = "RuntimeError"


@attrs.frozen
class ScriptedHandler:
    """``fail`` rules first; otherwise a delivery fails with probability ``rate``, raising ``error``."""

    fail: tuple[FailRule, ...] = ()
    rate: float = 0.0
    error: str = "RuntimeError"
    seed: int = 0

    def __call__(self, record: h.RetryRecord) -> None:
        partition = int(record.headers[h.ORIGINAL_PARTITION])
        offset = int(record.headers[h.ORIGINAL_OFFSET])
        attempt = record.attempt + 1
        for rule in self.fail:
            if rule.partition == partition and rule.offset == offset:
                if rule.times is None or attempt <= rule.times:
                    raise error_class(rule.error)(f"record {partition}@{offset} failed (rule)")
                return
        if self.rate and random.Random(f"{self.seed}:{partition}:{offset}:{attempt}").random() < self.rate:
            raise error_class(self.error)(f"record {partition}@{offset} failed (rate {self.rate})")
