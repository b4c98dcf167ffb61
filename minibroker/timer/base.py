"""What every timer shares: its notion of now, its executor and its wake-up hook.

A timer is *manual* when built without a ``clock``: ``now`` is then the latest
time given to ``advance_clock`` (``start_ms`` before that). With a clock, ``now``
is read from it on every ``add``. Due tasks go to ``executor`` (default: run
inline). ``on_earlier_expiration(ms)`` is called when the timer's next
expiration moves earlier, so a sleeping reaper can be woken. The three are
public attributes so a runtime can attach a timer to its clock, executor and
reaper after construction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minibroker.timer.task import TimerTask

Executor = Callable[[TimerTask], object]
Clock = Callable[[], int]


def task_label(task: TimerTask) -> str:
    """How traces name a task: its ``op_id`` if it has one."""
    label = getattr(task, "op_id", None)
    return str(label) if label is not None else f"task-{task.delay_ms}ms"


def run_inline(task: TimerTask) -> None:
    """The default executor: run the task where it became due."""
    task.run()


class TimerBase:
    """Common state of SystemTimer and the baselines."""

    name = "?"

    def __init__(
        self,
        start_ms: int,
        clock: Clock | None,
        executor: Executor | None,
        on_earlier_expiration: Callable[[int], object] | None,
    ) -> None:
        self._now = start_ms
        #: returns the current time in ms; new tasks are armed against it (None: manual)
        self.clock: Clock | None = clock
        #: receives every due task, in FIFO order
        self.executor: Executor = executor if executor is not None else run_inline
        #: called with an expiration that became the timer's earliest
        self.on_earlier_expiration = on_earlier_expiration
        #: when set, SystemTimer emits timer.add / timer.reinsert / timer.fire events with these fields
        self.tracer: Any = None
        self.trace_context: dict[str, Any] = {}

    def now(self) -> int:
        """The time new tasks are armed against."""
        clock = self.clock
        return self._now if clock is None else clock()

    def _observe(self, now_ms: int) -> None:
        if now_ms > self._now:
            self._now = now_ms

    def close(self) -> None:
        """Nothing to release: the executor belongs to the caller."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(size={self.size})"  # type: ignore[attr-defined]
