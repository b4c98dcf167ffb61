"""The wheel drawing on hand-made and real timer views: cells, pointer, overflow levels, the delay queue."""

from __future__ import annotations

from minibroker.timer import SystemTimer, TimerTask
from minibroker.timer.snapshot import BucketView, LevelView, TimerView
from minibroker.tui.wheel import WheelView, cell_label, delay_queue, level_cells, pointer_slot
from tests.tui.helpers import text_of


def _timer(levels: tuple[LevelView, ...], kind: str = "kafka") -> TimerView:
    return TimerView(kind, 0, sum(b.size for level in levels for b in level.buckets), levels, ())


def test_cell_labels():
    assert [cell_label(0, False), cell_label(0, True), cell_label(7, True), cell_label(999, True)] == [
        "·",
        "0",
        "7",
        "999",
    ]
    assert [cell_label(1000, True), cell_label(99_999, True), cell_label(100_000, True)] == ["1k", "99k", "∞"]


def test_pointer_is_the_slot_of_the_levels_current_time():
    assert pointer_slot(LevelView(2, 20, 20, 400, 340, ())) == 17
    assert pointer_slot(LevelView(3, 400, 20, 8000, 8400, ())) == 1
    level = LevelView(1, 1, 5, 5, 0, (BucketView(1, 1, 2), BucketView(3, 3, 0)))
    assert level_cells(level) == ["·", "2", "·", "0", "·"]


def test_a_real_timer_with_an_overflow_level_and_a_cancelled_entry():
    timer = SystemTimer(tick_ms=1, wheel_size=4)  # levels of 4, 16, 64 ms
    tasks = [TimerTask(delay) for delay in (2, 9, 40, 41)]
    for task in tasks:
        timer.add(task)
    tasks[1].cancel()  # its bucket keeps its place in the delay queue, with no entry
    view = timer.snapshot()
    assert [level.level for level in view.levels] == [1, 2, 3]
    assert text_of(WheelView(view), width=60) == [
        "tick ms   0  1  2  3  interval  currentTime",
        "L1    1 ▸ ·  ·  1  ·         4            0",
        "L2    4 ▸ ·  ·  0  ·        16            0",
        "L3   16 ▸ ·  ·  2  ·        64            0",
        "delay queue 2 ms ×1 L1·2 → 8 ms ×0 L2·2 → 32 ms ×2 L3·2",
    ]
    assert delay_queue(view) == [(2, 1, 2, 1), (8, 2, 2, 0), (32, 3, 2, 2)]


def test_cells_wrap_when_the_wheel_is_wider_than_the_screen():
    level = LevelView(1, 1, 30, 30, 29, (BucketView(29, 29, 3),))
    lines = text_of(WheelView(_timer((level,))), width=40)
    assert lines == [
        "    0  1  2  3  4  5  6  7  8  9 10 11",
        "L1 tick 1 ms  interval 30 ms ·",
        "currentTime 29 ms",
        "    ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·",
        "    ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·",
        "    ·  ·  ·  ·  ·▸ 3",
        "delay queue 29 ms ×3 L1·29",
    ]


def test_a_timer_without_a_wheel_shows_its_queue_head():
    heap = TimerView("heap", 5, 2, (), ((30, 1), (45, 1)))
    assert text_of(WheelView(heap)) == ["next expirations 30 ms ×1 → 45 ms ×1"]
    assert text_of(WheelView(TimerView("heap", 0, 0, (), ()))) == ["next expirations empty"]
    hashed = TimerView("hashed", 5, 1, (LevelView(1, 1, 4, 4, 5, (BucketView(2, -1, 1),)),), ((6, 0),))
    assert text_of(WheelView(hashed)) == [
        "tick ms   0  1  2  3  interval  currentTime",
        "L1    1   ·▸ ·  1  ·         4            5",
        "next expirations 6 ms",
    ]


def test_a_long_queue_is_cut():
    level = LevelView(1, 1, 20, 20, 0, tuple(BucketView(i, i, 1) for i in range(1, 16)))
    lines = text_of(WheelView(_timer((level,)), queue_items=3), width=200)
    assert lines[-1] == "delay queue 1 ms ×1 L1·1 → 2 ms ×1 L1·2 → 3 ms ×1 L1·3  … 12 more"
