"""Pure core: Kafka's hierarchical timing wheel and its baselines. Pure, synchronous, integer ms.

Nothing here imports trio: time is whatever integer the caller passes to
``advance_clock`` or returns from the ``clock`` callable.
"""

from minibroker.timer.bucket import TaskCounter, TimerTaskList
from minibroker.timer.hashed_wheel import HashedWheelTimer
from minibroker.timer.heap_timer import HeapTimer
from minibroker.timer.protocol import TIMERS, Timer, make_timer
from minibroker.timer.snapshot import BucketView, LevelView, TimerView
from minibroker.timer.system_timer import SystemTimer
from minibroker.timer.task import TimerTask, TimerTaskEntry
from minibroker.timer.wheel import TimingWheel

__all__ = [
    "TIMERS",
    "BucketView",
    "HashedWheelTimer",
    "HeapTimer",
    "LevelView",
    "SystemTimer",
    "TaskCounter",
    "Timer",
    "TimerTask",
    "TimerTaskEntry",
    "TimerTaskList",
    "TimerView",
    "TimingWheel",
    "make_timer",
]
