"""What the delay designs hold at an instant, for the TUI (plain frozen data)."""

from __future__ import annotations

import attrs

from minibroker.delayed_messages.file_wheel import WheelView


@attrs.frozen
class LevelPartitionView:
    partition: str
    held: int
    paused: bool


@attrs.frozen
class WheelCopyView:
    broker: int
    #: "active", "standby" or "out of sync"
    role: str
    wheel: WheelView


@attrs.frozen
class DelaysView:
    """The levels' held counts (led partitions of live services) and every wheel copy."""

    levels: tuple[LevelPartitionView, ...] = ()
    levels_delivered: int = 0
    wheel: tuple[WheelCopyView, ...] = ()
    wheel_delivered: int = 0
    wheel_tick_ms: int = 0
