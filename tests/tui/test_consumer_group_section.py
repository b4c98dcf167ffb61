"""The TUI's coordinator section for KIP-848 consumer groups, on frames of the bundled group_consumer_*
scenarios: member epochs, owned against target partitions, keyed tasks counting down."""

from __future__ import annotations

from minibroker.tui.commands import snapshot_frame
from minibroker.tui.render import coordinator_table
from tests.tui.helpers import SCENARIOS, text_of

REBALANCE = str(SCENARIOS / "group_consumer_rebalance_timeout.toml")
JOIN = str(SCENARIOS / "group_consumer_join.toml")


def test_at_22000_the_stalled_member_still_owns_t1_and_its_rebalance_task_has_1000_ms_left():
    lines = text_of(coordinator_table(snapshot_frame(REBALANCE, 22_000)), width=200)
    title = " ".join(line.strip() for line in lines[:3])  # the title wraps at the table's width
    assert title.startswith(
        "group coordinator · broker 0 · __consumer_offsets partitions 0 · 4 keyed timer tasks on the wheel"
        " · consumer groups (KIP-848)"
    )
    rows = [line.split() for line in lines if line.startswith(("g ", " "))]
    assert ["g", "Reconciling", "2/2", "c1", "1", "UNREVOKED", "t-0", "t-1", "t-0", "44,000", "1,000"] in rows
    assert ["c2", "2", "UNRELEASED", "t-1", "43,500", "-"] in rows
    [timers] = [line for line in lines if line.startswith("keyed timers")]
    assert timers.startswith("keyed timers (deadline ms): rebalance-timeout-g-c1… → 23,000 · ")


def test_once_stable_every_member_owns_its_target_and_no_rebalance_task_runs():
    # session tasks: c1's re-armed by its 3000 acknowledgement (48000), c2's by its 4000 heartbeat (49000)
    lines = text_of(coordinator_table(snapshot_frame(JOIN, 4000)), width=200)
    rows = [line.split() for line in lines if line.startswith(("g ", " "))]
    assert ["g", "Stable", "2/2", "c1", "2", "STABLE", "t-0", "t-1", "t-0", "t-1", "44,000", "-"] in rows
    assert ["c2", "2", "STABLE", "t-2", "t-3", "t-2", "t-3", "45,000", "-"] in rows
