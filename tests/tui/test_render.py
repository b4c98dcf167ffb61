"""Frames of real runs rendered to a recording Console: exact wheel cells, queue, purgatories, ISR, log."""

from __future__ import annotations

import attrs
import pytest

from minibroker.tui.commands import snapshot_frame
from minibroker.tui.render import render_frame, speed_text
from minibroker.tui.state import ExpectationLine, Status
from tests.tui.helpers import ACKS_ALL, CASCADE, SCENARIOS, recording_console, text_of


@pytest.fixture(scope="module")
def cascade_200():
    return snapshot_frame(CASCADE, 200)


@pytest.fixture(scope="module")
def cascade_345():
    return snapshot_frame(CASCADE, 345)


def _inner(line: str) -> str:
    """A line of a panel without its borders."""
    return line[2:-1].rstrip()


def _frame_text(frame, width=120, events=3):
    console = recording_console(width, 200)
    return text_of(render_frame(frame, console, events=events), width)


def test_at_200_ms_the_450_ms_task_sits_in_level_3_slot_1_and_the_350_ms_one_in_level_2_slot_17(cascade_200):
    lines = _frame_text(cascade_200)
    assert lines[2].startswith(
        "╭─ timing wheel · broker 0 · kafka timer · 2 armed · reaper last advanced it at 200 ms ─"
    )
    # the wheel's clocks have not moved: no bucket was due yet (the reaper's 200 ms poll found none)
    assert [_inner(line) for line in lines[3:8]] == [
        "tick ms   0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18 19  interval  currentTime",
        "L1    1 ▸ ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·        20            0",
        "L2   20 ▸ ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  1  ·  ·       400            0",
        "L3  400 ▸ ·  1  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·     8,000            0",
        "delay queue 340 ms ×1 L2·17 → 400 ms ×1 L3·1",
    ]
    assert all(line.startswith("│ ") and line.endswith("│") and len(line) == 120 for line in lines[3:8])


def test_at_345_ms_the_350_ms_task_fell_to_level_1_and_the_pointers_moved(cascade_345):
    lines = _frame_text(cascade_345)
    assert lines[4].startswith(
        "│ L1    1 ▸ ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  1  ·  ·  ·  ·  ·  ·  ·  ·  ·        20          340"
    )
    # level 2's current time 340 is slot 17, the bucket just drained
    assert lines[5].startswith(
        "│ L2   20   ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·▸ ·  ·  ·       400          340"
    )
    assert lines[6].startswith(
        "│ L3  400 ▸ ·  1  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·     8,000            0"
    )
    assert lines[7].startswith("│ delay queue 350 ms ×1 L1·10 → 400 ms ×1 L3·1 ")
    events = [line for line in lines if " b0 timer.reinsert " in line]
    assert events == [
        "│     340  b0 timer.reinsert      task-350 from bucket 340 → L1 slot 10 (bucket 350, expires 350, "
        "10 ms left)          │"
    ]


def test_purgatories_and_partitions(cascade_200):
    lines = _frame_text(cascade_200)
    start = lines.index("purgatories · watched = PurgatorySize · delayed = NumDelayedOperations")
    assert lines[start + 1 : start + 6] == [
        "purgatory         keys  watched  delayed  condition  expired  leadership  purges  last purge",
        "─" * 92,
        "b0 Produce           1        2        2          0        0           0       0  -",
        "b0 Fetch             0        0        0          2        0           0       0  -",
        "b0 DeleteRecords     0        0        0          0        0           0       0  -",
    ]
    start = lines.index("partitions (replicas: LEO/HW, * leader)")
    assert lines[start + 1] == "partition  leader  epoch  ISR    replicas"
    assert lines[start + 3] == "t-0             0      0  0,1,2  b0* 2/0  b1 1/0 paused  b2 1/0 paused"


def test_expectations_as_they_pass(cascade_345):
    lines = _frame_text(cascade_345)
    assert "╭─ expectations · 3 passed · 0 failed · 7 to come ─" in "\n".join(lines)
    marks = [line[2:14] for line in lines if line.startswith("│ ") and " expect[" in line]
    assert marks == [
        "✓ expect[0] ",
        "✓ expect[1] ",
        "· expect[2] ",
        "✓ expect[3] ",
        "· expect[4] ",
        "· expect[5] ",
        "· expect[6] ",
        "· expect[7] ",
        "· expect[8] ",
        "· expect[9] ",
    ]


def test_a_failed_expectation_shows_what_was_seen(cascade_345):
    failed = ExpectationLine("expect[8]", "request task-350: completed at 349", False, "completed at 350")
    frame = attrs.evolve(cascade_345, expectations=(failed,))
    lines = _frame_text(frame)
    assert "│ ✗ expect[8] request task-350: completed at 349 — seen completed at 350" in "\n".join(lines)
    assert "expectations · 0 passed · 1 failed · 0 to come" in "\n".join(lines)


def test_pending_isr_and_a_down_replica():
    shrink = str(SCENARIOS / "slow_follower_isr_shrink.toml")
    rows = [
        next(line for line in _frame_text(snapshot_frame(shrink, at)) if line.startswith("t-0 "))
        for at in (2000, 2001, 2002)
    ]
    assert rows == [
        # the leader proposed the shrink at 2000, the controller commits it at 2001, the leader learns at 2002
        "t-0             0      0  0,1,2 → 0,1 pending  b0* 40/20  b1 40/20  b2 21/20",
        "t-0             0      0  0,1 committed, leader not told yet  b0* 41/20  b1 40/20  b2 21/20",
        "t-0             0      0  0,1  b0* 41/40  b1 41/20  b2 21/20",
    ]
    failover = snapshot_frame(str(SCENARIOS / "leader_failover.toml"), 1000)
    lines = _frame_text(failover)
    assert _inner(lines[3]) == "broker 0 is down: no timer"
    assert "b0 down" in lines
    row = next(line for line in lines if line.startswith("t-0 "))
    assert row == "t-0             1      1  1,2  b0 5/3 down  b1* 5/5  b2 5/4"


def test_the_header_shows_time_mode_speed_and_keys(cascade_200):
    frame = attrs.evolve(cascade_200, status=Status("running", 0.0225, keys=True))
    lines = _frame_text(frame, width=160)
    assert lines[1] == (
        " t = 200 ms virtual (span ~450 ms)   running ×0.0225 (1 s = 22.5 ms)   broker 0   "
        "space pause · n step · +/- speed · b broker · q quit"
    )
    assert speed_text(2.5) == "×2.5 (1 s = 2.5 s)"


def test_the_header_shows_when_the_run_falls_behind_its_speed(cascade_200):
    frame = attrs.evolve(cascade_200, status=Status("running", 0.6, achieved=0.33))
    lines = _frame_text(frame, width=160)
    assert lines[1] == (
        " t = 200 ms virtual (span ~450 ms)   running ×0.6 (1 s = 600 ms)   behind: ×0.33   broker 0"
    )


def test_a_fitted_frame_fills_the_screen_exactly():
    frame = snapshot_frame(ACKS_ALL, 105)
    for width, height in ((120, 45), (100, 30), (80, 24), (200, 60)):
        console = recording_console(width, height)
        lines = text_of(render_frame(frame, console, height=height), width, height)
        assert len(lines) == height, (width, height)
        assert lines[0].startswith(" minibroker  acks_all")


def test_a_fitted_frame_gives_the_events_the_lines_left():
    frame = snapshot_frame(ACKS_ALL, 105)
    console = recording_console(120, 60)
    lines = text_of(render_frame(frame, console, height=60), 120, 60)
    top = next(n for n, line in enumerate(lines) if line.startswith("╭─ events"))
    bottom = next(n for n, line in enumerate(lines) if line.startswith("╭─ expectations"))
    shown = lines[top + 1 : bottom - 1]
    assert len(shown) == 60 - 8 - top - 2  # 6 expectations and 2 borders below
    assert shown[-1].startswith("│     105  b2 replicate ")
    assert all(line.startswith("│ ") and line.endswith("│") for line in shown)


def test_narrow_width_puts_each_level_on_two_lines(cascade_200):
    lines = _frame_text(cascade_200, width=80)
    assert lines[3:9] == [
        "│     0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18 19               │",
        "│ L1 tick 1 ms  interval 20 ms · currentTime 0 ms                              │",
        "│   ▸ ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·               │",
        "│ L2 tick 20 ms  interval 400 ms · currentTime 0 ms                            │",
        "│   ▸ ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  1  ·  ·               │",
        "│ L3 tick 400 ms  interval 8,000 ms · currentTime 0 ms                         │",
    ]


def test_a_partition_row_shows_a_reassignment_under_way():
    frame = snapshot_frame(ACKS_ALL, 0)
    (partition, *others) = frame.view.partitions
    moving = attrs.evolve(partition, adding=(2,), removing=(0,))
    frame = attrs.evolve(frame, view=attrs.evolve(frame.view, partitions=(moving, *others)))
    row = next(line for line in _frame_text(frame) if line.startswith(f"{partition.partition} "))
    assert row.endswith("  adding 2 removing 0")
