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
