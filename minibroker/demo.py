"""``minibroker demo-timer``: watch Kafka's hierarchical timing wheel cascade.

Arms a few tasks on a SystemTimer driven by the trio Reaper, then prints each
reaper advance: where every task sits (level, slot, bucket expiration) and
which tasks fired. By default it replays the classic worked example of
Kafka's timing wheel: tick 1 ms, 20 buckets; a 350 ms task lands in level 2 slot 17, a
450 ms task in level 3 slot 1, which is reinserted into level 2 with 50 ms
left, then level 1 with 10 ms left, and fires at exactly 450 ms.

Time is virtual (instant) unless ``--speed`` asks for a multiple of real time.
"""

from __future__ import annotations

import trio
import trio.testing
from rich.console import Console
from rich.table import Table

from minibroker.runtime import MsClock, PacedClock, Reaper
from minibroker.timer import SystemTimer, TimerTask


class _DemoTask(TimerTask):
    __slots__ = ("label", "fired_at")

    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.label = f"task {delay_ms} ms"
        self.fired_at: int | None = None


def _place(timer: SystemTimer, task: _DemoTask, now: int) -> str:
    where = timer.locate(task)
    if where is None:
        return f"fired at {task.fired_at} ms" if task.fired_at is not None else "due: queued to the executor"
    level, slot, expiration = where
    left = task._entry.expiration_ms - now
    return f"level {level} slot {slot}, bucket expires at {expiration} ms ({left} ms left)"


def _levels_table(timer: SystemTimer) -> Table:
    table = Table(title="wheel levels", show_lines=False)
    for column in ("level", "tick ms", "interval ms", "current time", "buckets (slot:expiration×entries)"):
        table.add_column(column)
    for level in timer.snapshot().levels:
        cells = " ".join(f"{b.index}:{b.expiration}×{b.size}" for b in level.buckets if b.size)
        table.add_row(
            str(level.level), str(level.tick_ms), str(level.interval), str(level.current_time), cells
        )
    return table


async def _run(console: Console, delays: list[int], tick_ms: int, wheel_size: int) -> list[_DemoTask]:
    clock = MsClock()
    timer = SystemTimer(tick_ms, wheel_size)
    reaper = Reaper(timer, clock)
    tasks = [_DemoTask(d) for d in delays]
    remaining = len(tasks)
    done = trio.Event()

    def fire(task: _DemoTask) -> None:
        nonlocal remaining
        task.fired_at = clock.now_ms()
        console.print(f"[bold green]t={task.fired_at} ms[/]  {task.label} fired")
        remaining -= 1
        if remaining == 0:
            done.set()

    for task in tasks:
        task._action = lambda task=task: fire(task)
    last: list[object] = []

    def show(now: int) -> None:
        nonlocal last
        where = [(timer.locate(t), t.fired_at) for t in tasks]
        if where != last:
            last = where
            places = [_place(timer, t, now) for t in tasks]
            if now:
                console.print(f"[bold]t={now} ms[/]  the reaper advanced the wheel")
            for task, place in zip(tasks, places, strict=True):
                console.print(f"    {task.label:>14}: {place}")

    async with trio.open_nursery() as nursery:
        await nursery.start(reaper.run)
        for task in tasks:
            timer.add(task)
        console.print(f"[bold]t=0 ms[/]  armed {len(tasks)} tasks (tick {tick_ms} ms, {wheel_size} buckets)")
        show(0)
        console.print(_levels_table(timer))
        reaper.add_hook(show)
        if tasks:
            await done.wait()
        nursery.cancel_scope.cancel()
    console.print(_levels_table(timer))
    return tasks


def run_demo(
    delays: list[int],
    *,
    tick_ms: int = 1,
    wheel_size: int = 20,
    speed: float | None = None,
    console: Console | None = None,
) -> list[tuple[int, int | None]]:
    """Run the demo; return (delay, fired_at) per task. Virtual time unless ``speed`` is given."""
    console = console or Console()
    clock = trio.testing.MockClock(autojump_threshold=0) if speed is None else PacedClock(speed)
    tasks = trio.run(_run, console, delays, tick_ms, wheel_size, clock=clock)
    return [(t.delay_ms, t.fired_at) for t in tasks]
