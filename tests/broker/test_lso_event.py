"""The leader's ``lso`` trace event: the LSO each time it moves below the HW, and once back at it."""

from __future__ import annotations

from pathlib import Path

import pytest

from minibroker.scenario import load_scenario, run_scenario
from minibroker.trace.events import ListSink

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def lso_events(name: str) -> list[tuple[int, int, str, int, int]]:
    sink = ListSink()
    run_scenario(load_scenario(SCENARIOS / f"{name}.toml"), sinks=[sink])
    return [(e["time_ms"], e["broker"], e["partition"], e["lso"], e["hw"]) for e in sink.of_kind("lso")]


def test_the_stalled_reader_partition_holds_the_lso_at_0_until_the_timeout_abort_at_20000():
    # the transaction's records at 1000 (HW 2), the plain records at 2000 and 3000, the ABORT marker
    assert lso_events("txn_read_committed_stalled") == [
        (1000, 0, "t-0", 0, 2),
        (2000, 0, "t-0", 0, 3),
        (3000, 0, "t-0", 0, 4),
        (20000, 0, "t-0", 5, 5),
    ]


def test_with_followers_the_lag_starts_when_the_hw_passes_the_transaction_first_offset():
    # broker 1 leads t-0; the records' HW reaches 3 at 1280, the COMMIT marker's at 1580
    assert lso_events("txn_end_txn_waits_for_isr") == [(1280, 1, "t-0", 0, 3), (1580, 1, "t-0", 4, 4)]


@pytest.mark.parametrize("name", ["acks_all", "leader_failover", "group_session_timeout"])
def test_a_run_without_transactions_has_no_lso_event(name):
    assert lso_events(name) == []
