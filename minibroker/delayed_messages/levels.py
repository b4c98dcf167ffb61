"""Delay levels: a short increasing list of delays, one internal topic each.

A delayed message goes to the *smallest level >= its delay* and is held for the
level's whole delay: its due time is its timestamp plus the level, never its
own delay. Rounding up (never down) means a message is never early; holding
for the level (its due time forced to timestamp + level) means every message of a level partition
is due in the order it was written, so the DelayService can forward each
partition first-in first-out and commit a single offset per partition.

Names: ``500ms``, ``5s``, ``1m``, ``2h`` (a whole number and a unit); the level's
topic is ``__delay_<name>`` in its canonical spelling (``60s`` -> ``__delay_1m``).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable

import attrs

#: twelve levels from 5 s to 2 h (RocketMQ's ``messageDelayLevel`` has eighteen, from 1 s to 2 h)
DEFAULT_LEVELS = ("5s", "10s", "30s", "1m", "2m", "5m", "10m", "20m", "30m", "45m", "1h", "2h")
TOPIC_PREFIX = "__delay_"
_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
_DURATION = re.compile(r"^([0-9]+)(ms|s|m|h)$")


class DelayError(ValueError):
    """A delay or a level list minibroker cannot accept (the message names the expected form)."""


def parse_duration(text: str, where: str = "delay level") -> int:
    """``"30s"`` -> 30000; anything else than a positive whole number and ms/s/m/h raises DelayError."""
    match = _DURATION.match(text.strip()) if isinstance(text, str) else None
    if match is None or int(match.group(1)) == 0:
        raise DelayError(f"{where}: expected a positive duration like 500ms, 5s, 1m or 2h, got {text!r}")
    return int(match.group(1)) * _UNITS[match.group(2)]


def format_duration(ms: int) -> str:
    """The canonical name of ``ms``: the largest unit that divides it (60000 -> ``1m``)."""
    for unit in ("h", "m", "s"):
        if ms % _UNITS[unit] == 0:
            return f"{ms // _UNITS[unit]}{unit}"
    return f"{ms}ms"


@attrs.frozen
class DelayLevels:
    """Strictly increasing delays in ms; ``level_for`` rounds a delay up to one of them."""

    delays_ms: tuple[int, ...]

    @classmethod
    def parse(cls, names: Iterable[str] | str = DEFAULT_LEVELS, where: str = "delay.levels") -> DelayLevels:
        """From names (a list, or one comma-separated string); strictly increasing, at least one."""
        if isinstance(names, str):
            names = [name for name in names.split(",") if name.strip()]
        names = list(names)
        if not names:
            raise DelayError(f"{where}: expected at least one level like 5s")
        delays = tuple(parse_duration(name, f"{where}[{i}]") for i, name in enumerate(names))
        for i in range(1, len(delays)):
            if delays[i] <= delays[i - 1]:
                raise DelayError(f"{where}[{i}]: levels must increase, {names[i]!r} follows {names[i - 1]!r}")
        return cls(delays)

    @property
    def max_ms(self) -> int:
        return self.delays_ms[-1]

    def level_for(self, delay_ms: int) -> int:
        """The smallest level >= ``delay_ms`` (1 ms .. the largest level), else DelayError."""
        if delay_ms < 1:
            raise DelayError(f"delay_ms: expected at least 1, got {delay_ms}")
        i = bisect.bisect_left(self.delays_ms, delay_ms)
        if i == len(self.delays_ms):
            raise DelayError(
                f"delay_ms: {delay_ms} is longer than the largest level ({format_duration(self.max_ms)})"
            )
        return self.delays_ms[i]

    def topic(self, level_ms: int) -> str:
        return TOPIC_PREFIX + format_duration(level_ms)

    def topics(self) -> list[str]:
        return [self.topic(level) for level in self.delays_ms]

    def level_of_topic(self, topic: str) -> int | None:
        """The level whose topic is ``topic``, or None."""
        for level in self.delays_ms:
            if self.topic(level) == topic:
                return level
        return None
