"""PacedClock: virtual time at a chosen speed that stays exact.

``trio.testing.MockClock(rate=X)`` runs virtual time continuously at X times
real time, so any time spent computing (rendering a frame, a burst of
requests) moves virtual time on under the tasks' feet: a task woken at 340 ms
may see 341 ms, and a run at ``--speed 1`` is not the run ``minibroker run``
makes. ``PacedClock`` moves virtual time only while *every* task waits, the
way the autojump clock does, but paced at ``rate`` virtual seconds per real
second (``run --speed``/``--realtime`` and the TUI use it):

- when the run loop is about to block, the clock notes the real time and the
  earliest deadline; when the loop wakes, virtual time moves forward by the
  real time it slept times ``rate``, **never past that deadline**. So a task
  woken by a deadline sees exactly its deadline, as in virtual time, and
  timed expectations hold at exact milliseconds at any speed;
- while a task runs, virtual time stands still (``current_time()`` never
  changes between two run-loop iterations); a run whose tasks need more real
  time than the speed allows therefore falls *behind* real time instead of
  going wrong (``PaceMeter`` measures by how much);
- ``wait_all_tasks_blocked`` waiters are woken before time moves, as with the
  autojump clock (this reads trio's run loop state: trio is pinned exactly);
- ``rate = 0`` pauses; ``rate = math.inf`` jumps straight to the next
  deadline (instant virtual time); ``advance_to`` jumps by hand (the TUI's
  step key).

Invariant: ``current_time()`` never decreases.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable

import trio


def idle_waiters() -> bool:
    """True if some task sits in ``wait_all_tasks_blocked`` (trio's run-loop state)."""
    runner = getattr(trio._core._run.GLOBAL_RUN_CONTEXT, "runner", None)
    return bool(getattr(runner, "waiting_for_idle", None))


class PacedClock(trio.abc.Clock):
    """Virtual seconds that advance at ``rate`` per real second, only while all tasks wait."""

    def __init__(self, rate: float = 1.0, *, real_clock: Callable[[], float] = time.perf_counter) -> None:
        if not rate >= 0:
            raise ValueError(f"rate must be >= 0, got {rate}")
        self._rate = float(rate)
        self._real = real_clock
        self._now = 0.0
        self._idle_since: float | None = None  # real time the run loop went idle, until it wakes
        self._cap = math.inf  # the earliest deadline when it went idle

    @property
    def rate(self) -> float:
        """Virtual seconds per real second; 0 is paused, ``math.inf`` is instant."""
        return self._rate

    @rate.setter
    def rate(self, rate: float) -> None:
        if not rate >= 0:
            raise ValueError(f"rate must be >= 0, got {rate}")
        self.current_time()  # settle any idle time at the old rate
        self._rate = float(rate)

    def real_time(self) -> float:
        """The real clock the pace is measured against, in seconds."""
        return self._real()

    def advance_to(self, seconds: float) -> None:
        """Jump virtual time forward to ``seconds`` (no effect if that is not ahead)."""
        self.current_time()
        self._now = max(self._now, seconds)

    # --- trio.abc.Clock --------------------------------------------------------------------------
    def start_clock(self) -> None:
        self._idle_since = None

    def current_time(self) -> float:
        if self._idle_since is not None:
            # the run loop's first look after an idle wait: move on by the time it slept
            slept = self._real() - self._idle_since
            self._idle_since = None
            if math.isinf(self._rate):
                step = self._cap
            else:
                step = self._now + slept * self._rate if slept > 0 and self._rate > 0 else self._now
            if not math.isinf(step):
                self._now = max(self._now, min(self._cap, step))
        return self._now

    def deadline_to_sleep_time(self, deadline: float) -> float:
        # trio calls this only from its run loop, right before blocking, when no task is runnable
        if deadline <= self._now:
            return 0.0
        waiters = idle_waiters()
        if not waiters:
            self._idle_since = self._real()
            self._cap = deadline
        if self._rate == 0 or (math.isinf(deadline) and math.isinf(self._rate)):
            return math.inf
        if math.isinf(self._rate):
            # instant: jump at once (but leave idle waiters a positive timeout so trio wakes them)
            return 1.0 if waiters else 0.0
        return (deadline - self._now) / self._rate


class PaceMeter:
    """The speed a paced run actually achieves: virtual seconds per real second over a recent window.

    ``sample(real, virtual)`` records one observation (the TUI takes one per frame);
    ``rate()`` is the virtual time moved over the real time elapsed between the oldest
    kept sample and the newest, once they are at least ``min_s`` of real time apart
    (None before). Samples older than ``window_s`` are dropped; ``reset`` forgets all
    (call it when the requested speed changes or the run is paused).
    """

    def __init__(self, window_s: float = 3.0, min_s: float = 1.0) -> None:
        self.window_s = window_s
        self.min_s = min_s
        self._samples: collections.deque[tuple[float, float]] = collections.deque()

    def reset(self) -> None:
        self._samples.clear()

    def sample(self, real: float, virtual: float) -> None:
        samples = self._samples
        samples.append((real, virtual))
        while len(samples) > 2 and real - samples[1][0] >= self.window_s:
            samples.popleft()

    def rate(self) -> float | None:
        """Achieved virtual seconds per real second, or None while the window is too short."""
        if len(self._samples) < 2:
            return None
        (real0, virtual0), (real1, virtual1) = self._samples[0], self._samples[-1]
        elapsed = real1 - real0
        if elapsed < self.min_s:
            return None
        return (virtual1 - virtual0) / elapsed

    def behind(self, requested: float, tolerance: float = 0.9) -> float | None:
        """The achieved rate when it is below ``tolerance`` times ``requested``, else None."""
        achieved = self.rate()
        if achieved is None or achieved >= tolerance * requested:
            return None
        return achieved
