"""The timing wheel of one broker drawn as text: one row of cells per level, then the delay queue.

A level row reads ``L2`` and the level's tick, then ``wheel_size`` cells, one per
bucket, then the level's interval and clock (Kafka's ``currentTime``), all in ms::

    tick ms   0  1  2 ... 17 18 19  interval  currentTime
    L2   20 ▸ ·  ·  · ...  1  ·  ·       400            0

A cell shows the bucket's entry count; ``·`` is an empty bucket that is not in the
delay queue (expiration -1) and ``0`` an empty one that still is (its entries were
cancelled). ``▸`` marks the slot holding the level's current time
(``current_time // tick_ms % wheel_size``). Overflow levels appear as the wheel
creates them. When a row does not fit the width, each level's figures go on a line
and its cells on the line(s) under it; a ``compact`` view (a small screen) instead
leaves the interval and clock columns out while the cells fit on one line (the
pointer still shows each level's clock).

The delay queue is every queued bucket (expiration not -1) in expiration order,
the order the reaper will take them: ``340 ms ×1 L2·17``. The baselines have no
delay queue of buckets: the heap timer shows its next expirations, the hashed wheel
its single level and its next tick.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from minibroker.timer.snapshot import LevelView, TimerView

POINTER = "▸"
EMPTY = "·"
TICK_HEADER = "tick ms"
INTERVAL_HEADER = "interval"
CLOCK_HEADER = "currentTime"


def cell_label(size: int, queued: bool) -> str:
    """The text of one bucket's cell: its entry count, ``·`` when empty and not queued."""
    if size == 0:
        return "0" if queued else EMPTY
    if size < 1000:
        return str(size)
    if size < 100_000:
        return f"{size // 1000}k"
    return "∞"


def pointer_slot(level: LevelView) -> int:
    """The slot of the level's current time."""
    return (level.current_time // level.tick_ms) % level.wheel_size


def level_cells(level: LevelView) -> list[str]:
    """The cell labels of a level, slot 0 first."""
    cells = [EMPTY] * level.wheel_size
    for bucket in level.buckets:
        cells[bucket.index] = cell_label(bucket.size, bucket.expiration != -1)
    return cells


def delay_queue(timer: TimerView) -> list[tuple[int, int | None, int | None, int]]:
    """(expiration, level, slot, entries) of every queued bucket, in the order the reaper takes them."""
    if not timer.levels or timer.kind != "kafka":
        return [(expiration, None, None, size) for expiration, size in timer.queue_head]
    queued = [
        (bucket.expiration, level.level, bucket.index, bucket.size)
        for level in timer.levels
        for bucket in level.buckets
        if bucket.expiration != -1
    ]
    return sorted(queued)


def _ms(value: int) -> str:
    return f"{value:,} ms"


class WheelView:
    """A rich renderable of ``timer``'s levels and delay queue (see the module docstring)."""

    def __init__(self, timer: TimerView, queue_items: int = 12, compact: bool = False) -> None:
        self.timer = timer
        self.queue_items = queue_items
        #: prefer one line per level (without interval and clock) to two when the width is short
        self.compact = compact

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        levels = self.timer.levels
        if levels:
            yield from self._levels(levels, width)
        yield self._queue()

    def _levels(self, levels: tuple[LevelView, ...], width: int) -> RenderResult:
        cells = [level_cells(level) for level in levels]
        wheel_size = max(level.wheel_size for level in levels)
        # a cell is its label right-aligned, with room on the left for the pointer
        cell_width = max(3, len(str(wheel_size - 1)) + 1, *(len(c) + 1 for row in cells for c in row))
        ticks = [f"{level.tick_ms:,}" for level in levels]
        intervals = [f"{level.interval:,}" for level in levels]
        clocks = [f"{level.current_time:,}" for level in levels]
        tick_width = max(len(t) for t in ticks)
        label_width = max(len(TICK_HEADER), 3 + tick_width) + 1
        interval_width = max(len(INTERVAL_HEADER), *(len(i) for i in intervals))
        clock_width = max(len(CLOCK_HEADER), *(len(c) for c in clocks))
        suffix_width = 2 + interval_width + 2 + clock_width
        if label_width + wheel_size * cell_width + suffix_width <= width:
            # one line per level, under a header naming the columns (times in ms)
            index_row = Text(f"{TICK_HEADER.rjust(label_width - 1)} ", style="dim")
            index_row.append_text(self._indices(range(wheel_size), cell_width))
            index_row.append(
                f"  {INTERVAL_HEADER.rjust(interval_width)}  {CLOCK_HEADER.rjust(clock_width)}", style="dim"
            )
            yield index_row
            for level, tick, interval, clock, row in zip(
                levels, ticks, intervals, clocks, cells, strict=True
            ):
                line = Text(f"L{level.level} {tick.rjust(label_width - 4)} ", style="bold")
                line.append_text(self._cells(row, range(len(row)), pointer_slot(level), cell_width))
                line.append(f"  {interval.rjust(interval_width)}  {clock.rjust(clock_width)}", style="dim")
                yield line
            return
        if self.compact and label_width + wheel_size * cell_width <= width:
            # a little narrower: still one line per level, without the interval and clock columns
            # (the pointer ▸ shows where each level's clock is)
            index_row = Text(f"{TICK_HEADER.rjust(label_width - 1)} ", style="dim")
            yield index_row.append_text(self._indices(range(wheel_size), cell_width))
            for level, tick, row in zip(levels, ticks, cells, strict=True):
                line = Text(f"L{level.level} {tick.rjust(label_width - 4)} ", style="bold")
                yield line.append_text(self._cells(row, range(len(row)), pointer_slot(level), cell_width))
            return
        # narrow: the level's figures on a line, then its cells on as many lines as they need
        indent = 2
        per_row = max(1, (width - indent) // cell_width)
        yield Text(" " * indent).append_text(self._indices(range(min(wheel_size, per_row)), cell_width))
        for level, row in zip(levels, cells, strict=True):
            head = Text(f"L{level.level} tick {_ms(level.tick_ms)}", style="bold")
            head.append(
                f"  {INTERVAL_HEADER} {_ms(level.interval)} · {CLOCK_HEADER} {_ms(level.current_time)}",
                style="dim",
            )
            yield head
            for start in range(0, len(row), per_row):
                slots = range(start, min(len(row), start + per_row))
                yield Text(" " * indent).append_text(self._cells(row, slots, pointer_slot(level), cell_width))

    @staticmethod
    def _indices(slots: range, cell_width: int) -> Text:
        return Text("".join(str(slot).rjust(cell_width) for slot in slots), style="dim")

    def _cells(self, row: list[str], slots: range, pointer: int, cell_width: int) -> Text:
        line = Text()
        for slot in slots:
            line.append_text(self._cell(row[slot], slot == pointer, cell_width))
        return line

    @staticmethod
    def _cell(label: str, is_pointer: bool, width: int) -> Text:
        if is_pointer:
            return Text(POINTER + label.rjust(width - 1), style="bold reverse yellow")
        style = "dim" if label == EMPTY else ("bold cyan" if label != "0" else "magenta")
        return Text(label.rjust(width), style=style)

    def _queue(self) -> Text:
        queue = delay_queue(self.timer)
        kafka = self.timer.kind == "kafka"
        text = Text("delay queue " if kafka else "next expirations ", style="bold")
        if not queue:
            text.append("empty", style="dim")
            return text
        for n, (expiration, level, slot, size) in enumerate(queue[: self.queue_items]):
            if n:
                text.append(" → ", style="dim")
            text.append(_ms(expiration), style="bold")
            if kafka or size:
                text.append(f" ×{size}")
            if level is not None:
                text.append(f" L{level}·{slot}", style="dim")
        if len(queue) > self.queue_items:
            text.append(f"  … {len(queue) - self.queue_items} more", style="dim")
        return text
