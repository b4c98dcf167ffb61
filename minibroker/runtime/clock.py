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
from trio.testing import MockClock

_TOLERANCE_MS = 1e-6


class MsClock:
    """Integer milliseconds since ``origin`` (trio seconds; default: trio's time at creation).

    On trio's autojump ``MockClock`` (rate 0) the virtual time is the clock's base
    and only moves when the run loop jumps it, so ``now_ms`` reads that base and
    recomputes the milliseconds only when it changed (the value is the one
    ``current_time()`` gives: ``base + 0 * elapsed``). This uses two private
    attributes of the pinned trio's ``MockClock``.
    """

    __slots__ = ("origin", "_read", "_mock", "_base", "_ms")

    def __init__(self, origin: float | None = None) -> None:
        self.origin = trio.current_time() if origin is None else origin
        self._read = None
        self._mock: MockClock | None = None
        self._base = math.nan
        self._ms = 0

    def now_ms(self) -> int:
        """Whole milliseconds elapsed since the origin."""
        mock = self._mock
        if mock is not None and mock._rate == 0:
            base = mock._virtual_base
            if base != self._base:
                self._base = base
                self._ms = math.floor((base - self.origin) * 1000 + _TOLERANCE_MS)
            return self._ms
        read = self._read
        if read is None:
            # bind the run's clock once (created outside trio.run, the clock is not known yet)
            clock = trio.lowlevel.current_clock()
            read = self._read = clock.current_time
            if type(clock) is MockClock:
                self._mock = clock
                return self.now_ms()
        return math.floor((read() - self.origin) * 1000 + _TOLERANCE_MS)

    def to_seconds(self, ms: int) -> float:
        """The trio time at which ``now_ms()`` becomes ``ms``."""
        return self.origin + ms / 1000

    async def sleep_until(self, ms: int) -> None:
        """Sleep until ``now_ms() >= ms``."""
        await trio.sleep_until(self.to_seconds(ms))
