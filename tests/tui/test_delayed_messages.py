"""The delayed-messages panel of a real run: held counts and paused partitions, the wheel's copies."""

from __future__ import annotations

from minibroker.tui.commands import snapshot_frame
from minibroker.tui.render import render_frame
from tests.tui.helpers import SCENARIOS, recording_console, text_of


def _lines(path, at, width=150):
    frame = snapshot_frame(str(SCENARIOS / path), at)
    return text_of(render_frame(frame, recording_console(width, 200), events=2), width, 200)


def test_the_levels_held_counts_and_the_paused_partition():
    lines = _lines("delay_back_pressure.toml", 4_999)
    start = next(i for i, line in enumerate(lines) if "─ delayed messages ─" in line)
    body = [line[2:].rstrip(" │") for line in lines[start + 1 : start + 8]]
    assert "delay levels · delivered 0" in body[0]
    rows = [" ".join(line.split()) for line in body if "__delay_" in line]
    assert rows == ["__delay_1m-0 0 fetching", "__delay_30s-0 0 fetching", "__delay_5s-0 3 paused"]


def test_the_wheel_copies_with_their_pointer_slots_and_roles():
    lines = _lines("delay_wheel_vs_levels.toml", 19_000)
    text = "\n".join(lines)
    assert "file wheel · tick 1,000 ms · delivered 1" in text
    # the wheel's table sits right of the levels' one: broker, role, pointer, slot, slots with messages
    wheel_rows = []
    for line in lines:
        words = line.strip("│ ").split()
        roles = [i for i, word in enumerate(words) if word in ("active", "standby")]
        if roles:
            wheel_rows.append(words[roles[0] - 1 : roles[0] + 4])
    assert wheel_rows == [
        ["0", "active", "19", "19", "1"],
        ["1", "standby", "19", "19", "1"],
        ["2", "standby", "19", "19", "1"],
    ]
