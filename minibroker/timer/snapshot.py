"""Plain, immutable views of a timer's state, for the TUI, the trace and tests."""

from __future__ import annotations

import attrs


@attrs.frozen
class BucketView:
    """One bucket: its slot on the level, its expiration (-1 when not queued) and its entries."""

    index: int
    expiration: int
    size: int


@attrs.frozen
class LevelView:
    """One wheel level; ``buckets`` lists only slots that hold entries or are queued."""

    level: int
    tick_ms: int
    wheel_size: int
    interval: int
    current_time: int
    buckets: tuple[BucketView, ...]


@attrs.frozen
class TimerView:
    """A timer at one instant: its kind, clock, size, levels and the delay queue's head.

    ``queue_head`` holds ``(expiration, entries)`` of the earliest queued buckets, in order.
    """

    kind: str
    now: int
    size: int
    levels: tuple[LevelView, ...]
    queue_head: tuple[tuple[int, int], ...]
