"""Every bundled scenario runs and all its expectations hold (the scenarios are part of CI)."""

from pathlib import Path

import pytest

from minibroker.commands import bundled_scenarios
from minibroker.scenario import load_scenario, run_scenario
from minibroker.scenario.loader.events import COMMON, KINDS

SCENARIOS = bundled_scenarios(Path(__file__).resolve().parents[2] / "scenarios")
REQUIRED = {
    "acks_all",
    "acks_1_vs_all",
    "follower_paused_timeout",
    "slow_follower_isr_shrink",
    "min_isr_not_enough",
    "not_enough_after_append",
    "fetch_min_bytes",
    "fetch_max_wait",
    "leader_failover",
    "purge_interval",
    "timing_wheel_cascade",
    "load_lagging_follower",
    # regressions/
    "crashed_follower_holds_hw",
    "shutdown_follower_holds_hw",
    # the DeleteRecords purgatory
    "delete_records_low_watermark",
}


def test_the_library_is_complete_and_documented():
    names = {path.stem for path in SCENARIOS}
    assert names >= REQUIRED
    for path in SCENARIOS:
        first = path.read_text().splitlines()[0]
        assert first.startswith(f"# {path.stem}: "), (
            f"{path.name} must open with a comment saying what it shows"
        )
        assert "Notice" in path.read_text(), f"{path.name} must say what a reader should notice"


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_expectations_hold(path):
    scenario = load_scenario(path)
    unknown: set[tuple[str, str]] = set()

    def catalogued(event):  # every emitted kind and field is one an expectation may name
        fields = KINDS.get(event["kind"], frozenset()) | COMMON
        unknown.update((event["kind"], name) for name in event if name not in fields)

    result = run_scenario(scenario, sinks=[catalogued])
    failed = [f"{r.where}: expected {r.expected}; seen {r.seen}" for r in result.results if not r.passed]
    assert not failed, failed
    assert len(result.results) == len(scenario.expectations) > 0
    assert not unknown, f"add these to minibroker/scenario/loader/events.py: {sorted(unknown)}"
