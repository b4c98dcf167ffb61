"""The retries panel of a real run: records in each topic of the chain, the scheduler's pending count."""

from __future__ import annotations

from minibroker.scenario.features.retry import RetryTopicView, RetryView
from minibroker.tui.commands import snapshot_frame
from minibroker.tui.render import render_frame
from minibroker.tui.retry import retry_panel
from tests.tui.helpers import SCENARIOS, recording_console, text_of


def _panel(path, at, width=150):
    frame = snapshot_frame(str(SCENARIOS / path), at)
    lines = text_of(render_frame(frame, recording_console(width, 200), events=2), width, 200)
    start = next(i for i, line in enumerate(lines) if "─ retries of orders ─" in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("╰"))
    return [" ".join(line.strip("│ ").split()) for line in lines[start + 1 : end]]


def test_the_poison_record_on_its_third_retry_topic():
    # retry_poison_dlt at 450 ms: the poison record waits in orders-retry-3 (due 1300), one is dead
    rows = _panel("retry_poison_dlt.toml", 450)
    assert rows[:2] == ["wheel scheduler", "topic role records pending 1"]
    assert rows[2].endswith("processed 2")
    assert rows[3:8] == [
        "orders source 6 dead 1",
        "orders-retry-1 after attempt 1 1 handler calls 6",
        "orders-retry-2 after attempt 2 1",
        "orders-retry-3 after attempt 3 1",
        "orders-dlt dead letters 1",
    ]


def test_nothing_pending_once_the_poison_record_is_dead():
    rows = _panel("retry_poison_dlt.toml", 1300)
    assert rows[1] == "topic role records pending 0"
    assert "orders source 7 dead 2" in rows and "orders-dlt dead letters 2" in rows


def test_a_blocking_retry_shows_the_paused_partition():
    rows = _panel("retry_blocking_stall.toml", 250)
    assert rows[3:5] == [
        "orders source 4 handler calls 3",
        "orders-dlt dead letters 0 orders-0 paused until 400 ms",
    ]
    assert rows[0] == "blocking retries (in place)"
    assert not any("pending" in row for row in rows)  # no scheduler in place


def test_a_long_chain_is_summed_on_one_row():
    topics = [RetryTopicView("t", 5)] + [RetryTopicView(f"t-retry-{n}", n) for n in range(1, 10)]
    view = RetryView("t", "wheel", False, (*topics, RetryTopicView("t-dlt", 2)), 0, 0, 0, 0, ())
    lines = text_of(retry_panel(view), 100, 40)
    rows = [" ".join(line.strip("│ ").split()) for line in lines]
    assert any(row.startswith("… 4 more retry topics 30") for row in rows)  # 6 + 7 + 8 + 9
    assert any(row.startswith("t-dlt dead letters 2") for row in rows)
