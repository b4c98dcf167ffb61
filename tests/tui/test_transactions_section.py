"""The TUI's transactions section and LSO column, on frames of the bundled transaction scenarios."""

from __future__ import annotations

from minibroker.coordinator.transaction.views import abort_time
from minibroker.tui.commands import snapshot_frame
from minibroker.tui.render import partition_table, render_frame
from minibroker.tui.transactions import transactions_table
from tests.tui.helpers import CASCADE, SCENARIOS, recording_console, text_of

STALLED = str(SCENARIOS / "txn_read_committed_stalled.toml")
FAILOVER = str(SCENARIOS / "txn_coordinator_failover.toml")


def _rows(lines: list[str], first: str) -> list[list[str]]:
    return [line.split() for line in lines if line.startswith(first)]


def test_at_15000_the_open_transaction_counts_down_to_the_check_at_20000_and_holds_the_lso_at_0():
    frame = snapshot_frame(STALLED, 15_000)
    lines = text_of(transactions_table(frame.view, frame.broker), width=120)
    assert lines[0] == "transactions (ms) · abort check every 10,000 (b0 next 20,000) aborts those past due"
    # began 1000 + timeout 15000 = due 16000; the check at 10000 is before it, the one at 20000 aborts it
    assert _rows(lines, "tx ") == [
        ["tx", "Ongoing", "1000000/0", "t-0", "b0", "15,000", "1,000", "16,000", "20,000", "5,000"]
    ]
    partitions = text_of(partition_table(frame), width=120)
    assert partitions[0] == "partitions (replicas: LEO/HW, * leader; LSO −held)"
    # the HW is 4 (two transactional records, two plain ones); the LSO stays at the transaction's offset 0
    assert _rows(partitions, "t-0") == [["t-0", "0", "0", "0", "−4", "0", "b0*", "4/4"]]


def test_at_19999_one_ms_is_left_and_at_20000_the_abort_is_complete_with_the_lso_at_the_hw():
    lines = text_of(transactions_table(snapshot_frame(STALLED, 19_999).view, 0), width=120)
    assert _rows(lines, "tx ")[0][-1] == "1"
    frame = snapshot_frame(STALLED, 20_000)
    lines = text_of(transactions_table(frame.view, frame.broker), width=120)
    assert lines[0].endswith("(b0 next 30,000) aborts those past due")
    # the timeout's abort bumped the epoch; nothing is open: no due time, no countdown
    assert _rows(lines, "tx ") == [
        ["tx", "CompleteAbort", "1000000/1", "-", "b0", "15,000", "-", "-", "-", "-"]
    ]
    assert _rows(text_of(partition_table(frame), width=120), "t-0") == [
        ["t-0", "0", "0", "5", "0", "b0*", "5/5"]
    ]


def test_a_new_coordinator_reading_its_partition_shows_it_loading():
    # broker 0 crashed at 1560; broker 1 reads __transaction_state-0 for 330 ms (until 1890)
    frame = snapshot_frame(FAILOVER, 1_700)
    lines = text_of(transactions_table(frame.view, frame.broker), width=120)
    assert lines[0] == "transactions (ms) · abort check every 10,000 (b1 next 11,560) aborts those past due"
    assert _rows(lines, "partition 0") == [["partition", "0", "loading", "b1"]]
    assert _rows(text_of(partition_table(frame), width=120), "t-0") == [
        ["t-0", "2", "0", "0", "−3", "2", "b2*", "3/3"]
    ]


def test_the_whole_frame_carries_the_section_and_a_scenario_without_transactions_shows_neither():
    console = recording_console(160, 60)
    console.print(render_frame(snapshot_frame(STALLED, 15_000), console, height=60))
    assert any(line.startswith("transactions (ms)") for line in console.export_text().splitlines())
    frame = snapshot_frame(CASCADE, 200)
    assert transactions_table(frame.view, frame.broker) is None
    assert text_of(partition_table(frame), width=120)[0] == "partitions (replicas: LEO/HW, * leader)"
    assert "LSO" not in text_of(partition_table(frame), width=120)[1]


def test_the_abort_check_is_the_first_one_strictly_after_the_due_time():
    assert abort_time(1_000, 15_000, 10_000, 10_000) == 20_000
    assert abort_time(0, 10_000, 10_000, 10_000) == 20_000  # due exactly at a check: the next one
    assert abort_time(0, 5_000, 10_000, 10_000) == 10_000  # already due: the next check
    assert abort_time(0, 5_000, -1, 10_000) == -1  # no check armed
