"""The full example in docs/scenarios.md is a valid scenario whose expectations hold."""

import re
from pathlib import Path

from minibroker.scenario import parse_scenario, run_scenario

DOC = Path(__file__).resolve().parents[2] / "docs" / "scenarios.md"


def test_documented_example_runs():
    block = re.search(r"```toml\n(.*?)```", DOC.read_text(), re.S).group(1)
    scenario = parse_scenario(block, "docs/scenarios.md")
    assert [s.action if hasattr(s, "action") else type(s).__name__ for s in scenario.steps] == [
        "Produce",
        "pause",
    ]
    result = run_scenario(scenario)
    assert [r.passed for r in result.results] == [True, True]
    assert result.named["first"][0].completed_ms == 112


def test_the_documented_limits_are_the_loaders():
    from minibroker.scenario.loader.document import MAX_DOCUMENT_BYTES, MAX_NESTING
    from minibroker.scenario.loader.limits import (
        MAX_BATCH,
        MAX_BROKERS,
        MAX_EVENTS,
        MAX_MS,
        MAX_PARTITION_REPLICAS,
        MAX_PROBLEMS,
        SETTING_LIMITS,
    )

    limits = DOC.read_text().split("## Limits")[1]
    assert f"| `brokers` | {MAX_BROKERS} |" in limits
    assert f"| `records` and `bytes` of a `produce` or `load` step | {MAX_BATCH:,} " in limits
    assert f"`__delay_wheel`) | {MAX_PARTITION_REPLICAS:,} |" in limits
    for name in ("offsets.topic.num.partitions", "num.partitions", "delay.topic.partitions"):
        assert SETTING_LIMITS[name] == (1, MAX_PARTITION_REPLICAS), name
    assert f"`delay.topic.partitions` | 1 to {MAX_PARTITION_REPLICAS:,} |" in limits
    assert f"one day, {MAX_MS:,} ms |" in limits
    assert f"| the projected run | {MAX_EVENTS:,} events" in limits
    assert (
        f"| the file | {MAX_DOCUMENT_BYTES // 2**20} MiB, UTF-8, "
        f"tables and arrays nested at most {MAX_NESTING} deep |" in limits
    )
    low, high = SETTING_LIMITS["minibroker.timer.wheel.size"]
    assert f"| `minibroker.timer.wheel.size` | {low} to {high} " in limits
    assert f"| `log.segment.bytes` | at least {SETTING_LIMITS['log.segment.bytes'][0]} " in limits
    assert f"At most {MAX_PROBLEMS} lines are" in DOC.read_text().replace("\n", " ")
