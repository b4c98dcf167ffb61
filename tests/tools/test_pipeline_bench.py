"""tools/pipeline_bench.py plans real load-scenario runs that add up to the events asked for, and times
a baseline commit against this tree in alternating pairs (tools/bench_baseline.py)."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from minibroker.scenario.model import Load
from tests.tools.spark_tools import run_tool

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


# --- --baseline: this tree against an earlier commit, in alternating pairs ---------------------
sys.path.insert(0, str(ROOT / "tools"))
import bench_baseline  # noqa: E402

needs_git = pytest.mark.skipif(
    not (ROOT / ".git").exists(), reason="--baseline reads commits: the tests run outside a git checkout"
)


def test_pairs_swap_the_order_every_pair_and_give_this_tree_over_baseline():
    order = []
    seconds = iter([40.0, 20.0, 30.0, 60.0, 50.0, 25.0])

    def run(side):
        order.append(side)
        return next(seconds)

    done = bench_baseline.pairs(3, run)
    assert order == ["baseline", "current", "current", "baseline", "baseline", "current"]
    assert done == [
        {"baseline_s": 40.0, "current_s": 20.0, "ratio": 0.5},
        {"baseline_s": 60.0, "current_s": 30.0, "ratio": 0.5},
        {"baseline_s": 50.0, "current_s": 25.0, "ratio": 0.5},
    ]
    uneven = [
        {"baseline_s": 40.0, "current_s": 30.0, "ratio": 0.75},
        {"baseline_s": 60.0, "current_s": 20.0, "ratio": 0.333},
    ]
    assert bench_baseline.summary(uneven) == {
        "baseline_total_s": 100.0,
        "current_total_s": 50.0,
        "ratio": 0.5,  # total against total, not the mean of the pairs' ratios
        "ratio_min": 0.333,
        "ratio_max": 0.75,
    }


@needs_git
def test_a_commit_is_resolved_and_its_files_written(tmp_path):
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    commit = bench_baseline.resolve("HEAD", ROOT)
    assert commit == head.stdout.strip() and len(commit) == 40
    tree = bench_baseline.checkout(commit, ROOT, tmp_path / "tree")
    committed = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{commit}:minibroker/analytics/analyze.py"], capture_output=True
    ).stdout
    assert (tree / "minibroker" / "analytics" / "analyze.py").read_bytes() == committed
    with pytest.raises(bench_baseline.BaselineError) as error:
        bench_baseline.resolve("no-such-rev", ROOT)
    assert str(error.value) == f"--baseline no-such-rev: not a commit of the git checkout at {ROOT}"


def _bench(*args):
    return run_tool("pipeline_bench.py", *args, timeout=900)


@needs_git
def test_an_unknown_baseline_is_one_line_before_any_work(tmp_path):
    out = _bench("--events", "20000", "--dir", str(tmp_path), "--baseline", "no-such-rev")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"pipeline_bench: --baseline no-such-rev: not a commit of the git checkout at {ROOT}"
    ]
    assert not any(tmp_path.iterdir())  # no trace generated


def test_pairs_must_be_in_range(tmp_path):
    out = _bench("--dir", str(tmp_path), "--baseline", "HEAD", "--pairs", "0")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1] == "pipeline_bench.py: error: --pairs must be 1 to 50, got 0"


@needs_git
def test_the_bench_times_a_baseline_commit_against_this_tree(tmp_path):
    pytest.importorskip("duckdb")
    from tests.analytics.conftest import require_java

    pytest.importorskip("pyspark")
    require_java()
    out = _bench("--events", "20000", "--dir", str(tmp_path), "--baseline", "HEAD", "--pairs", "1", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    figures = json.loads(out.stdout)
    assert figures["same_tables_as_duckdb"] is True
    found = figures["baseline"]
    assert found["commit"] == bench_baseline.resolve("HEAD", ROOT)
    assert found["master"] == "local[2]"
    [pair] = found["pairs"]
    assert pair["baseline_s"] > 1 and pair["current_s"] > 1  # two whole analyze commands ran
    assert pair["ratio"] == round(pair["current_s"] / pair["baseline_s"], 3)
    assert found["ratio"] == round(found["current_total_s"] / found["baseline_total_s"], 3)
    # each side wrote its own tables
    assert (tmp_path / "pairs-baseline" / "operations.parquet").is_file()
    assert (tmp_path / "pairs-current" / "operations.parquet").is_file()


@pytest.mark.parametrize(
    ("main", "expected"),
    [
        (
            "import sys\nprint('Traceback (most recent call last):', file=sys.stderr)\n"
            "print('KeyError: broken', file=sys.stderr)\nsys.exit(3)\n",
            "analyze of abc on local[2] failed (3): KeyError: broken",
        ),
        ("print('not json')\n", "analyze of abc on local[2] printed no JSON summary (exit 0): no message"),
    ],
)
def test_a_tree_whose_analyze_fails_is_one_line(tmp_path, main, expected):
    tree = tmp_path / "tree"
    (tree / "minibroker").mkdir(parents=True)
    (tree / "minibroker" / "__init__.py").write_text("")
    (tree / "minibroker" / "__main__.py").write_text(main)  # the tree's own package, not this one
    with pytest.raises(SystemExit) as stop:
        bench.analyze(tmp_path, tmp_path / "out", "local[2]", tree, "analyze of abc")
    assert str(stop.value) == expected
