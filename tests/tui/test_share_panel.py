"""The share partitions panel and the ShareFetch purgatory row, drawn from real runs of the bundled share
scenarios."""

from __future__ import annotations

from minibroker.tui.commands import snapshot_frame
from minibroker.tui.render import render_frame
from tests.tui.helpers import SCENARIOS, recording_console, text_of

#: the purgatories every broker lists
ALWAYS = ["Produce", "Fetch", "DeleteRecords", "ElectLeader"]


def _lines(path, at, broker=0, width=170):
    frame = snapshot_frame(str(SCENARIOS / path), at, broker=broker)
    return frame, text_of(render_frame(frame, recording_console(width, 200), events=2), width, 200)


def _panel_rows(lines):
    start = next(i for i, line in enumerate(lines) if "─ share partitions ─" in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("╰"))
    return [" ".join(line.strip("│ ").split()) for line in lines[start + 1 : end] if line.strip("│ ")]


def test_a_stalled_members_lock_counts_down():
    # share_lock_expiry at 2500: c1 holds 0..2 (delivery count 1) under the lock due at 3200
    _, lines = _lines("share_lock_expiry.toml", 2500)
    rows = _panel_rows(lines)
    assert rows[-1] == "sg t-0 @b0 0..2 0 3 0 0 0 0●1 1●1 2●1 c1 0..2 700 ms"


def test_the_window_keeps_acknowledged_and_archived_records_behind_an_acquired_one():
    frame, lines = _lines("share_leader_failover.toml", 900, broker=1)
    rows = _panel_rows(lines)
    assert rows[-1] == "sg t-0 @b1 0..3 0 1 2 1 0 0●1 1✓1 2✗1 3✓1 c1 0 29,200 ms"
    names = [p.name for p in frame.view.broker(1).purgatories]
    assert names == [
        "Produce",
        "Fetch",
        "DeleteRecords",
        "ElectLeader",
        "ShareFetch",
    ]  # it served ShareFetches
    assert [p.name for p in frame.view.broker(2).purgatories] == [
        "Produce",
        "Fetch",
        "DeleteRecords",
        "ElectLeader",
    ]


def test_a_scenario_without_share_groups_has_no_panel_and_no_share_fetch_purgatory():
    frame, lines = _lines("fetch_max_wait.toml", 100)
    assert frame.share_partitions is None and not any("share partitions" in line for line in lines)
    assert [p.name for p in frame.view.broker(0).purgatories] == [
        "Produce",
        "Fetch",
        "DeleteRecords",
        "ElectLeader",
    ]
