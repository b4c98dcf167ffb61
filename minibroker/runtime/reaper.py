"""Reaper: the trio task that drives one timer, Kafka's ExpirationReaper.

Loop: sleep until the timer's next expiration, but at most ``poll_interval_ms``
(200 ms, Kafka's reaper poll); advance the timer to now, which hands every due
task to the executor; then queue the hooks (purgatories register their purge
check, ``maybe_purge``, here) to the same executor, so they run with ``now``
after the operations that expired in this advance, in FIFO order.

While it sleeps, the timer reports any bucket that becomes the earliest
through ``on_earlier_expiration``, and the reaper pulls its wake-up deadline
forward: it never polls every millisecond, yet never fires late.

The reaper owns the timer's executor task (a ``TaskExecutor``) and attaches the
timer to the trio clock: after ``Reaper(timer, clock)`` the timer arms tasks at
``clock.now_ms() + delay``. ``run`` starts both tasks; cancelling the nursery
that runs it shuts both down cleanly and closes the timer once.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from minibroker.runtime.clock import MsClock
from minibroker.runtime.executor import TaskExecutor
from minibroker.timer import Timer

#: Kafka's reaper poll timeout (DelayedOperationPurgatory, SystemTimerReaper)
DEFAULT_POLL_INTERVAL_MS = 200


class Reaper:
    """Advances ``timer`` when its head bucket is due; runs due tasks on one executor task."""

    def __init__(
        self,
        timer: Timer,
        clock: MsClock,
        *,
        poll_interval_ms: int = DEFAULT_POLL_INTERVAL_MS,
        name: str = "ExpirationReaper",
    ) -> None:
        if poll_interval_ms < 1:
            raise ValueError("poll_interval_ms must be >= 1")
        self.timer = timer
        self.clock = clock
        self.poll_interval_ms = poll_interval_ms
        self.name = name
        self.executor = TaskExecutor()
        self.hooks: list[Callable[[int], object]] = []
        self.advances = 0
        self.wakeups = 0
        self.closed = False
        self._sleep: trio.CancelScope | None = None
        timer.clock = clock.now_ms
        timer.executor = self.executor.submit
        timer.on_earlier_expiration = self._on_earlier_expiration

    def add_hook(self, hook: Callable[[int], object]) -> None:
        """Call ``hook(now_ms)`` on the executor after every reaper advance."""
        self.hooks.append(hook)

    def _on_earlier_expiration(self, expiration_ms: int) -> None:
        scope = self._sleep
        if scope is not None:
            deadline = self.clock.to_seconds(expiration_ms)
            if deadline < scope.deadline:
                scope.deadline = deadline

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the executor and the reaper loop until cancelled; then close the timer once."""
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.executor.run)
                task_status.started()
                await self._loop()
        finally:
            if not self.closed:
                self.closed = True
                self.timer.close()

    async def _loop(self) -> None:
        timer, clock = self.timer, self.clock
        while True:
            now = clock.now_ms()
            wake = now + self.poll_interval_ms
            head = timer.next_expiration()
            if head is not None and head < wake:
                wake = head
            if wake > now:
                with trio.CancelScope(deadline=clock.to_seconds(wake)) as scope:
                    self._sleep = scope
                    try:
                        await trio.sleep_forever()
                    finally:
                        self._sleep = None
                self.wakeups += 1
            else:
                await trio.lowlevel.checkpoint()
            now = clock.now_ms()
            if timer.advance_clock(now):
                self.advances += 1
            if self.hooks:
                self.executor.submit(_AfterAdvance(self.hooks, now))  # type: ignore[arg-type]


class _AfterAdvance:
    """The hooks of one reaper iteration, queued behind that iteration's expired tasks."""

    __slots__ = ("hooks", "now")

    def __init__(self, hooks: list[Callable[[int], object]], now: int) -> None:
        self.hooks = hooks
        self.now = now

    def run(self) -> None:
        for hook in self.hooks:
            hook(self.now)
