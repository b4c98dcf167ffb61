"""TaskExecutor: Kafka's single-thread timer executor as one trio task.

Due timer tasks are submitted synchronously (``submit`` never blocks) into an
unbounded FIFO queue; one consumer task runs them one at a time, in
submission order, draining whatever is queued before it yields to trio. A
task whose ``run()`` returns an awaitable is awaited before the next starts.
The queue is a ``collections.deque`` and the idle consumer parks on trio's
low-level ``wait_task_rescheduled``: a submit to an idle executor wakes it
exactly as a send on an unbuffered memory channel would (one reschedule), and
a submit to a busy one is a deque append, with no channel bookkeeping per task.

An exception from a task propagates (ending the nursery that runs the
executor): in an emulation it is a bug, not something to log and forget.
A front end that must outlive a bug (``minibroker serve``) sets ``on_error``:
then an ``Exception`` from a task is handed to it, with its traceback, and the
executor goes on with the next task; the failed task's own effects stop where
it raised. Cancellation (any ``BaseException``) always propagates.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Callable

import trio

from minibroker.timer import TimerTask


class TaskExecutor:
    """Runs submitted tasks in FIFO order on a single trio task."""

    def __init__(self) -> None:
        self._queue: deque[TimerTask] = deque()
        #: the consumer task while it is parked on an empty queue
        self._idle: trio.lowlevel.Task | None = None
        self.submitted = 0
        self.completed = 0
        #: receives an exception a task raised, instead of the nursery (None: it propagates)
        self.on_error: Callable[[Exception], object] | None = None

    def submit(self, task: TimerTask) -> None:
        """Queue ``task`` to run; safe to call from synchronous code."""
        self.submitted += 1
        self._queue.append(task)
        idle = self._idle
        if idle is not None:
            self._idle = None
            trio.lowlevel.reschedule(idle)

    @property
    def pending(self) -> int:
        """Tasks submitted but not finished."""
        return self.submitted - self.completed

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Consume the queue forever; cancel the surrounding nursery to stop."""
        task_status.started()
        queue = self._queue
        popleft = queue.popleft
        while True:
            if queue:
                # tasks queued while nothing ran yet: one checkpoint first, as a channel's receive does
                await trio.lowlevel.checkpoint_if_cancelled()
                await trio.lowlevel.cancel_shielded_checkpoint()
            else:
                await self._park()
            # drain everything already queued in this pass: a backlog of expired operations must not
            # wait one scheduler pass each (FIFO order is unchanged)
            while queue:
                task = popleft()
                try:
                    result = task.run()
                    if result is not None and inspect.isawaitable(result):
                        await result
                except Exception as error:
                    if self.on_error is None:
                        raise
                    self.on_error(error)
                self.completed += 1

    async def _park(self) -> None:
        """Sleep until ``submit`` queues a task (or the surrounding scope is cancelled)."""
        await trio.lowlevel.checkpoint_if_cancelled()
        self._idle = trio.lowlevel.current_task()

        def abort(_: object) -> trio.lowlevel.Abort:
            self._idle = None
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)
