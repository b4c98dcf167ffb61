"""Frame data: the scenario's span and default speed, the event sink, and frames taken in virtual time."""

from __future__ import annotations

import pytest

from minibroker.scenario import load_scenario, run_scenario
from minibroker.trace import ListSink
from minibroker.tui.commands import snapshot_frame
from minibroker.tui.state import EventLog, default_speed, estimate_span_ms
from minibroker.tui.virtual import play
from tests.tui.helpers import ACKS_ALL, CASCADE, SCENARIOS


@pytest.mark.parametrize(
    ("name", "span", "speed"),
    [
        ("timing_wheel_cascade", 450, 0.0225),  # from the completed_at of its requests
        ("acks_all", 110, 0.0055),
        ("purge_interval", 5000, 0.25),
        ("load_lagging_follower", 12000, 0.6),
    ],
)
def test_span_and_default_speed(name, span, speed):
    scenario = load_scenario(SCENARIOS / f"{name}.toml")
    assert estimate_span_ms(scenario) == span
    assert default_speed(scenario) == speed  # the span in about 20 s


def test_event_log_keeps_the_latest_and_counts_completions_by_cause():
    log = EventLog(keep=2)
    for n, cause in enumerate(["condition", "expiry", "condition", "leadership"]):
        log(
            {
                "seq": n,
                "time_ms": n,
                "kind": "op.complete",
                "broker": 1,
                "purgatory": "Produce",
                "cause": cause,
            }
        )
    log({"seq": 4, "time_ms": 4, "kind": "hw", "broker": 1})
    assert log.total == 5
    assert [event["seq"] for event in log.latest] == [3, 4]
    assert dict(log.completed) == {
        (1, "Produce", "condition"): 2,
        (1, "Produce", "expiry"): 1,
        (1, "Produce", "leadership"): 1,
    }


@pytest.mark.parametrize("at", [0, 200, 345, 449])
def test_a_frame_in_virtual_time_leaves_the_run_as_minibroker_run_makes_it(at):
    scenario = load_scenario(CASCADE)
    full = ListSink()
    run_scenario(scenario, sinks=[full])
    seen = ListSink()
    times = []
    result = play(scenario, seed=None, times=iter([at]), on_time=lambda r, ms: times.append(ms), sinks=[seen])
    assert result is None  # stopped after the frame
    assert times == [at]
    # exactly the events up to the end of ms `at`, in the same order
    assert list(seen) == [event for event in full if event["time_ms"] <= at]


def test_a_snapshot_after_the_end_shows_the_final_state():
    frame = snapshot_frame(ACKS_ALL, 5000)
    assert (frame.time_ms, frame.status.mode, frame.status.note) == (
        5000,
        "finished",
        "the run ended at 110 ms",
    )
    assert [line.passed for line in frame.expectations] == [True] * 6
    assert frame.view.partition("t-0").replica(0).high_watermark == 5


def test_expectations_decided_during_the_run():
    frame = snapshot_frame(ACKS_ALL, 105)
    assert [(line.where, line.passed) for line in frame.expectations] == [
        ("expect[0]", True),  # messages-0-2 was answered at 15 ms
        ("expect[1]", True),  # checked at 99 ms
        ("expect[2]", True),  # checked at 105 ms, the end of that ms
        ("expect[3]", None),
        ("expect[4]", None),
        ("expect[5]", None),
    ]
    assert frame.expectations[3].text == "t-0 at 109 ms"
