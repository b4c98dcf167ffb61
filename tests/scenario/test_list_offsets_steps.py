"""The list_offsets step: an admin's or a consumer's ListOffsets, answered as a request with its offset."""

from __future__ import annotations

from pathlib import Path

from minibroker.scenario import load_scenario, parse_scenario, run_scenario
from minibroker.scenario.model import ListOffsets

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def test_the_step_reads_special_timestamps_by_name_and_a_consumer_as_client():
    text = """
topics = [{ name = "t" }]
clients = [{ id = "c", type = "consumer", assign = ["t-0"] }]
steps = [
    { at = 5, action = "list_offsets", topic = "t", timestamp = "latest_tiered" },
    { at = 6, action = "list_offsets", client = "c", topic = "t", timestamp = 40, id = "by_time" },
]
"""
    first, second = parse_scenario(text, "x.toml").steps
    assert first == ListOffsets(5, 0, "admin", "t", 0, -5, None)
    assert second == ListOffsets(6, 1, "c", "t", 0, 40, "by_time")


def test_a_lookup_below_the_local_log_start_waits_for_the_remote_tier():
    result = run_scenario(load_scenario(SCENARIOS / "tiered_list_offsets_remote.toml"))
    assert [(r.where, r.seen) for r in result.results if not r.passed] == []
    assert len(result.results) == 13
    answers = {
        name: (r.errors["t-0"], r.offsets["t-0"], r.cause, r.completed_ms)
        for name, (r,) in result.named.items()
    }
    assert answers == {
        "earliest": ("NONE", 0, "immediate", 2050),
        "earliest_local": ("NONE", 12, "immediate", 2050),
        "latest_tiered": ("NONE", 11, "immediate", 2050),
        "latest": ("NONE", 15, "immediate", 2050),
        "remote": ("NONE", 6, "condition", 2150),
        "local": ("NONE", 12, "condition", 2250),
        "failed": ("UNKNOWN_SERVER_ERROR", -1, "condition", 2450),
    }
    assert result.named["latest_tiered"][0].client == "consumer"
    assert result.purgatory_totals[0]["RemoteListOffsets"]["expirations"] == 0


def test_a_consumers_lookup_lost_on_a_dropped_link_times_out_at_its_request_timeout():
    text = """
scenario = { end_ms = 40000 }
topics = [{ name = "t" }]
clients = [{ id = "c", type = "consumer", assign = ["t-0"] }]
steps = [
    { at = 10, action = "drop", between = ["c", 0] },
    { at = 20, action = "list_offsets", client = "c", topic = "t", timestamp = "latest", id = "lost" },
]
"""
    result = run_scenario(parse_scenario(text, "x.toml"))
    (request,) = result.named["lost"]
    # request.timeout.ms 30000 plus the client's grace of 1000, from 20
    assert (request.errors, request.offsets) == ({"t-0": "REQUEST_TIMED_OUT"}, {"t-0": -1})
    assert (request.cause, request.completed_ms) == ("network", 31020)
