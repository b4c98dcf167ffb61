"""TaskExecutor: Kafka's single-thread timer executor as one trio task.

Due timer tasks are submitted synchronously (``submit`` never blocks) into an
unbounded FIFO channel; one consumer task runs them one at a time, in
submission order, draining whatever is queued before it yields to trio. A
task whose ``run()`` returns an awaitable is awaited before the next starts.

An exception from a task propagates (ending the nursery that runs the
executor): in an emulation it is a bug, not something to log and forget.
A front end that must outlive a bug (``minibroker serve``) sets ``on_error``:
then an ``Exception`` from a task is handed to it, with its traceback, and the
executor goes on with the next task; the failed task's own effects stop where
it raised. Cancellation (any ``BaseException``) always propagates.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable

import trio

from minibroker.timer import TimerTask


class TaskExecutor:
    """Runs submitted tasks in FIFO order on a single trio task."""

    def __init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[TimerTask](math.inf)
        self.submitted = 0
        self.completed = 0
        #: receives an exception a task raised, instead of the nursery (None: it propagates)
        self.on_error: Callable[[Exception], object] | None = None

    def submit(self, task: TimerTask) -> None:
        """Queue ``task`` to run; safe to call from synchronous code."""
        self.submitted += 1
        self._send.send_nowait(task)

    @property
    def pending(self) -> int:
        """Tasks submitted but not finished."""
        return self.submitted - self.completed

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Consume the queue forever; cancel the surrounding nursery to stop."""
        task_status.started()
        receive_nowait = self._receive.receive_nowait
        async for task in self._receive:
            # drain everything already queued in this pass: a backlog of expired operations must not
            # wait one scheduler pass each (FIFO order is unchanged)
            while True:
                try:
                    result = task.run()
                    if result is not None and inspect.isawaitable(result):
                        await result
                except Exception as error:
                    if self.on_error is None:
                        raise
                    self.on_error(error)
                self.completed += 1
                try:
                    task = receive_nowait()
                except trio.WouldBlock:
                    break
