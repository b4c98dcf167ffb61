"""Scheduler: callbacks at exact virtual milliseconds, on a SystemTimer driven by a Reaper.

The cluster schedules everything that is "later" through one of these: network
deliveries, controller decisions, client timeouts, load generators. A callback
registered for time ``t`` runs at ``t`` exactly on the autojump clock; callbacks
due at the same ms run in registration order when they share a bucket (the
timer's FIFO), and always one at a time on the scheduler's executor task.

``call_later`` returns the ``TimerTask``; ``cancel()`` it to drop the callback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from minibroker.runtime.clock import MsClock
from minibroker.runtime.reaper import Reaper
from minibroker.timer import SystemTimer, TimerTask


class _Call(TimerTask):
    """A timer task that calls ``fn(*args)`` (no ``functools.partial`` per callback)."""

    __slots__ = ("_fn", "_args")

    def __init__(self, delay_ms: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.delay_ms = delay_ms
        self._entry = None
        self._action = None
        self.expiration_ms = -1
        self.bucket = None
        self._fn = fn
        self._args = args

    def run(self) -> Any:
        return self._fn(*self._args)


class Scheduler:
    """``call_later`` / ``call_at`` on a private SystemTimer and Reaper."""

    def __init__(self, clock: MsClock, name: str = "scheduler") -> None:
        self.clock = clock
        self.timer = SystemTimer()
        self.reaper = Reaper(self.timer, clock, name=name)

    def now(self) -> int:
        return self.clock.now_ms()

    def call_later(self, delay_ms: int, fn: Callable[..., Any], *args: Any) -> TimerTask:
        task = _Call(delay_ms if delay_ms > 0 else 0, fn, args)
        self.timer.add(task)
        return task

    def call_at(self, at_ms: int, fn: Callable[..., Any], *args: Any) -> TimerTask:
        return self.call_later(at_ms - self.clock.now_ms(), fn, *args)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.reaper.run(task_status=task_status)
