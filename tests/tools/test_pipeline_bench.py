"""tools/pipeline_bench.py plans real load-scenario runs that add up to the events asked for."""

import importlib.util
from pathlib import Path

from minibroker.scenario.model import Load

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("pipeline_bench", ROOT / "tools" / "pipeline_bench.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_plan_whole_runs_then_a_shortened_one():
    assert bench.plan(10_000_000) == [(seed, 1.0) for seed in range(20)]
    assert bench.plan(1_200_000) == [(0, 1.0), (1, 1.0), (2, 0.4)]
    assert bench.plan(1_005_000) == [(0, 1.0), (1, 1.0)]  # a remainder under 2% of a run is dropped
    assert bench.plan(100_000) == [(0, 0.2)]


def test_shortened_scales_only_the_load():
    scenario = bench.load_scenario(bench.SCENARIO)
    short = bench.shortened(scenario, 0.25)
    loads = [s for s in short.steps if isinstance(s, Load)]
    assert [s.duration_ms for s in loads] == [2500]
    assert [s for s in short.steps if not isinstance(s, Load)] == [
        s for s in scenario.steps if not isinstance(s, Load)
    ]


def test_generate_and_reuse(tmp_path):
    manifest = bench.generate(tmp_path / "t", 20_000, processes=1)
    assert (manifest["runs"], manifest["reused"]) == (1, False)
    assert manifest["events"] > 10_000
    assert bench.generate(tmp_path / "t", 20_000, processes=1)["reused"] is True
