"""The TUI's group coordinator section, on a frame of the bundled group_stalled_member scenario."""

from __future__ import annotations

from minibroker.tui.commands import snapshot_frame
from minibroker.tui.render import coordinator_table, render_frame
from tests.tui.helpers import SCENARIOS, recording_console, text_of

STALLED = str(SCENARIOS / "group_stalled_member.toml")
CASCADE = str(SCENARIOS / "timing_wheel_cascade.toml")


def test_at_24000_two_members_wait_in_join_the_stalled_one_heartbeats_and_join_g_is_due_at_25000():
    frame = snapshot_frame(STALLED, 24_000)
    lines = text_of(coordinator_table(frame), width=160)
    assert lines[0] == (
        "group coordinator · broker 0 · __consumer_offsets partitions 0 · 4 keyed timer tasks on the wheel"
    )
    (row,) = [line for line in lines if line.startswith("g ")]
    assert row.split() == [
        "g",
        "PreparingRebalance",
        "2",
        "range",
        "c1",
        "c1",
        "-",
        "awaiting",
        "join",
        "c2",
        "34,000",
        "c3",
        "305,000",
        "awaiting",
        "join",
    ]
    timers = [line for line in lines if line.startswith("keyed timers")]
    assert timers == [
        "keyed timers (deadline ms): join-g → 25,000 · heartbeat-g-c2… → 34,000 · "
        "heartbeat-g-c3… → 305,000 · expire-offsets-0 → 600,000"
    ]
    console = recording_console(160, 60)
    console.print(render_frame(frame, console, height=60))
    assert any("group coordinator · broker 0" in line for line in console.export_text().splitlines())


def test_a_broker_that_coordinates_nothing_shows_no_section():
    assert coordinator_table(snapshot_frame(CASCADE, 200)) is None
