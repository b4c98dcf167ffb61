"""trio's clock in integer milliseconds.

Floats stop here: everything below the runtime counts whole milliseconds. With
``trio.testing.MockClock(autojump_threshold=0)`` the times are virtual and
exact; with trio's default clock they are real, monotonic time.

Invariant: ``now_ms()`` never decreases, and after sleeping until
``to_seconds(m)`` it returns ``m`` (up to a tolerance of a nanosecond, so float
rounding of ``origin + m / 1000`` cannot make it ``m - 1``).
"""

from __future__ import annotations

import math

import trio

_TOLERANCE_MS = 1e-6


class MsClock:
    """Integer milliseconds since ``origin`` (trio seconds; default: trio's time at creation)."""

    __slots__ = ("origin", "_read")

    def __init__(self, origin: float | None = None) -> None:
        self.origin = trio.current_time() if origin is None else origin
        self._read = None

    def now_ms(self) -> int:
        """Whole milliseconds elapsed since the origin."""
        read = self._read
        if read is None:
            # bind the run's clock once (created outside trio.run, the clock is not known yet)
            read = self._read = trio.lowlevel.current_clock().current_time
        return math.floor((read() - self.origin) * 1000 + _TOLERANCE_MS)

    def to_seconds(self, ms: int) -> float:
        """The trio time at which ``now_ms()`` becomes ``ms``."""
        return self.origin + ms / 1000

    async def sleep_until(self, ms: int) -> None:
        """Sleep until ``now_ms() >= ms``."""
        await trio.sleep_until(self.to_seconds(ms))
