"""tools/bench_baseline.py: every benchmark in tools/ times itself against a commit in alternating pairs.

The pairing, the figure paths and the ratios are checked with fake tools in a throwaway git repository;
one real run of the cheapest tool checks that both sides run; every tool refuses a bad ``--baseline`` or
``--pairs`` in one line before doing any work.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import bench_baseline  # noqa: E402
from bench_baseline import Figure  # noqa: E402

needs_git = pytest.mark.skipif(
    not (ROOT / ".git").exists(), reason="--baseline reads commits: the tests run outside a git checkout"
)


# --- pairing and ratios ------------------------------------------------------------------------


def test_alternate_swaps_the_order_every_pair_baseline_first():
    seen = []

    def run(side):
        seen.append(side)
        return len(seen)

    done = bench_baseline.alternate(4, run)
    assert seen == ["baseline", "current", "current", "baseline"] * 2
    assert [pair["order"] for pair in done] == [["baseline", "current"], ["current", "baseline"]] * 2
    assert [(pair["baseline"], pair["current"]) for pair in done] == [(1, 2), (4, 3), (5, 6), (8, 7)]


def test_ratios_are_total_against_total_with_the_pairs_lowest_and_highest():
    done = [
        {"baseline": {"ops": 40.0, "p99": 2}, "current": {"ops": 30.0, "p99": 1}},
        {"baseline": {"ops": 60.0, "p99": 2}, "current": {"ops": 20.0, "p99": 3}},
    ]
    found, missing = bench_baseline.compared(done, [Figure("ops", "higher"), Figure("p99", "lower")])
    assert missing == []
    assert found["ops"] == {
        "better": "higher",
        "baseline_total": 100.0,
        "current_total": 50.0,
        "ratio": 0.5,  # total against total, not the mean of 0.75 and 0.333
        "ratio_min": 0.333,
        "ratio_max": 0.75,
        "pairs": [[40.0, 30.0], [60.0, 20.0]],
    }
    assert (found["p99"]["ratio"], found["p99"]["ratio_min"], found["p99"]["ratio_max"]) == (1.0, 0.5, 1.5)


def test_figure_paths_expand_objects_and_name_list_rows_by_their_fields():
    document = {
        "workloads": {"W1": {"ns": 10}, "W2": {"ns": 20, "name": "churn"}},
        "runs": [{"timer": "kafka", "rate": 1000.0, "p99": 1.5}, {"timer": "heap", "rate": 1000.0, "p99": 2}],
        "flag": True,
    }
    names = lambda path: {".".join(s): v for s, v in bench_baseline.expand(document, path)}  # noqa: E731
    assert names("workloads.*.ns") == {"workloads.W1.ns": 10, "workloads.W2.ns": 20}
    assert names("runs.[timer,rate].p99") == {
        "runs.timer=kafka,rate=1000.0.p99": 1.5,
        "runs.timer=heap,rate=1000.0.p99": 2,
    }
    assert names("flag") == {} and names("workloads.*.name") == {}  # only numbers are figures
    segments, _ = next(bench_baseline.expand(document, "runs.[timer].p99"))
    assert segments == ("runs", "timer=kafka", "p99")
    assert bench_baseline.lookup({"runs": list(reversed(document["runs"]))}, segments) == 1.5
    assert bench_baseline.lookup({"runs": []}, segments) is None


def test_a_figure_the_baseline_lacks_is_named_once_and_left_out():
    done = [{"baseline": {"a": 1}, "current": {"a": 2, "b": 3}}] * 2
    found, missing = bench_baseline.compared(done, [Figure("a"), Figure("b")])
    assert list(found) == ["a"] and missing == ["b"]


def test_forwarded_drops_baseline_and_pairs_and_asks_for_json():
    assert bench_baseline.forwarded(["--runs", "2", "--baseline", "HEAD", "--pairs=3"]) == [
        "--runs",
        "2",
        "--json",
    ]
    assert bench_baseline.forwarded(["--json", "--baseline=v1", "--pairs", "2", "-q"]) == ["--json", "-q"]
    # abbreviations argparse accepted: the tool run on each side must not compare again
    assert bench_baseline.forwarded(["--base", "HEAD", "--pai=2", "--runs", "1"]) == ["--runs", "1", "--json"]


def test_better_is_lower_or_higher():
    with pytest.raises(ValueError, match="better must be 'lower' or 'higher'"):
        Figure("x", "faster")


# --- fake tools in a throwaway repository -------------------------------------------------------

FAKE = """\
import argparse, json, os, sys
parser = argparse.ArgumentParser(prog="fake.py")
parser.add_argument("--json", action="store_true")
parser.parse_args()
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(SIDE + "\\n")
print(json.dumps(FIGURES))
"""


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _fake(root: Path, side: str, figures: dict, json_flag: bool = True) -> None:
    text = FAKE.replace("SIDE", repr(side)).replace("FIGURES", repr(figures))
    if not json_flag:
        text = text.replace('parser.add_argument("--json", action="store_true")\n', "")
    (root / "tools").mkdir(parents=True, exist_ok=True)
    (root / "tools" / "fake.py").write_text(text)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "log"))
    return root


@needs_git
def test_measure_runs_both_trees_alternately_and_compares_their_json(repo, tmp_path):
    _fake(repo, "baseline", {"speed": 10, "lat": {"p99": 4}})
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    commit = _git(repo, "rev-parse", "HEAD")
    _fake(repo, "current", {"speed": 20, "lat": {"p99": 2}, "new": 1})
    figures = [Figure("speed", "higher"), Figure("lat.*", "lower"), Figure("new", "lower")]
    found = bench_baseline.measure(commit, "tools/fake.py", ["--json"], figures, 3, root=repo, rev="HEAD")
    log = (tmp_path / "log").read_text().split()
    assert log == ["baseline", "current", "current", "baseline", "baseline", "current"]
    baseline = found["baseline"]
    assert (baseline["rev"], baseline["commit"], baseline["pairs"]) == ("HEAD", commit, 3)
    assert baseline["command"] == "python tools/fake.py --json"
    assert set(baseline["figures"]) == {"command_s", "speed", "lat.p99"}
    assert baseline["figures"]["speed"]["ratio"] == 2.0
    assert baseline["figures"]["speed"]["pairs"] == [[10, 20]] * 3
    assert baseline["figures"]["lat.p99"]["ratio"] == 0.5
    assert baseline["missing"] == [f"baseline {commit[:12]}: new not compared (not in its --json output)"]
    assert len(baseline["load_average_before"]) == len(baseline["load_average_after"]) == 3
    assert baseline["cpus"] >= 1
    assert found["document"] == {"speed": 20, "lat": {"p99": 2}, "new": 1}


@needs_git
def test_same_tool_runs_this_trees_script_against_each_trees_package(repo, tmp_path):
    (repo / "pkg.py").write_text("SPEED = 10\n")
    _fake(repo, "baseline", {"speed": 1})
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    commit = _git(repo, "rev-parse", "HEAD")
    (repo / "pkg.py").write_text("SPEED = 30\n")
    # this tree's tool reads the package of the tree it is pointed at
    script = FAKE.replace("print(json.dumps(FIGURES))", "import pkg; print(json.dumps({'speed': pkg.SPEED}))")
    (repo / "tools" / "fake.py").write_text(script.replace("SIDE", "os.environ['MINIBROKER_BENCH_TREE']"))
    found = bench_baseline.measure(
        commit, "tools/fake.py", ["--json"], [Figure("speed", "higher")], 1, root=repo, same_tool=True
    )
    assert found["baseline"]["same_tool"] is True
    assert found["baseline"]["figures"]["speed"]["pairs"] == [[10, 30]]
    trees = (tmp_path / "log").read_text().split()
    assert trees[1] == str(repo) and trees[0] != str(repo)  # baseline first: its checkout, then this tree


@needs_git
def test_a_baseline_tool_without_json_is_one_line_per_figure(repo):
    _fake(repo, "baseline", {"speed": 10}, json_flag=False)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    commit = _git(repo, "rev-parse", "HEAD")
    _fake(repo, "current", {"speed": 20, "size": 3})
    found = bench_baseline.measure(
        commit, "tools/fake.py", ["--json"], [Figure("speed", "higher"), Figure("size")], 1, root=repo
    )
    assert found["baseline"]["figures"] == {}  # nor the wall time of a run that only failed
    assert found["baseline"]["missing"] == [
        f"baseline {commit[:12]}: {name} not compared (baseline {commit[:12]}'s tools/fake.py has no --json)"
        for name in ("command_s", "speed", "size")
    ]


@needs_git
def test_a_baseline_without_the_tool_is_named_not_a_crash(repo):
    (repo / "README").write_text("x")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    commit = _git(repo, "rev-parse", "HEAD")
    _fake(repo, "current", {"speed": 20})
    found = bench_baseline.measure(commit, "tools/fake.py", ["--json"], [Figure("speed")], 1, root=repo)
    assert found["baseline"]["figures"] == {}
    reason = f"baseline {commit[:12]} has no tools/fake.py"
    assert found["baseline"]["missing"] == [
        f"baseline {commit[:12]}: {name} not compared ({reason})" for name in ("command_s", "speed")
    ]


# --- the real tools ------------------------------------------------------------------------------


@needs_git
def test_the_cheapest_tool_against_head_runs_both_sides():
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "chaos_bench.py"),
            *("--runs", "1", "--duration-ms", "100"),
            *("--baseline", "HEAD", "--pairs", "1", "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    document = json.loads(out.stdout)
    assert document["runs"] == 1 and document["violations"] == 0  # this tree's own figures
    baseline = document["baseline"]
    assert baseline["commit"] == bench_baseline.resolve("HEAD", ROOT)
    assert baseline["order"] == [["baseline", "current"]]
    assert baseline["missing"] == []
    for name in ("command_s", "runs_per_cpu_minute", "client_requests_per_cpu_s", "cpu_s"):
        figure = baseline["figures"][name]
        assert {"ratio", "ratio_min", "ratio_max", "baseline_total", "current_total"} <= set(figure)
        [[before, after]] = figure["pairs"]
        assert before > 0 and after > 0  # both sides ran and measured
    assert baseline["command"] == "python tools/chaos_bench.py --runs 1 --duration-ms 100 --json"


# each tool with the least it needs to parse its arguments
TOOLS = {
    "timer_bench": [],
    "purgatory_perf": ["--num", "10", "--rate", "10", "--workload", "low"],
    "emulator_bench": [],
    "group_bench": [],
    "delay_bench": [],
    "retry_bench": [],
    "wire_bench": [],
    "chaos_bench": [],
    "txn_bench": [],
    "pipeline_bench": [],
    "spark_floor": [],
    "control_bench": ["--connections", "1", "--round-trips", "1"],
    "share_vs_retry": ["--quick"],
    "share_lock_bench": ["--quick"],
}


#: test suites in tools/: they count passes and failures of another project's tests against ``serve``,
#: a figure of this tree alone that no baseline commit's timing would compare with, so they take no
#: --baseline/--pairs
SUITES = {"librdkafka_suite"}


def test_every_benchmark_in_tools_is_covered():
    skip = {"bench_baseline", "benchmarks_page", "docs_pictures", "duckdb_tables", "trace_digests"}
    assert {p.stem for p in (ROOT / "tools").glob("*.py")} - skip - SUITES == set(TOOLS)


def test_a_suite_refuses_bad_arguments_in_one_line():
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "librdkafka_suite.py"), "--timeout", "0"],
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "librdkafka_suite: --timeout: expected seconds > 0, got 0\n"


def _tool(name, *args):
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / f"{name}.py"), *TOOLS[name], *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


@needs_git
@pytest.mark.parametrize("name", sorted(TOOLS))
def test_an_unknown_baseline_is_one_line(name, tmp_path):
    where = ["--dir", str(tmp_path)] if name in ("pipeline_bench", "spark_floor") else []
    out = _tool(name, "--baseline", "no-such-rev", *where)
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        f"{name}: --baseline no-such-rev: not a commit of the git checkout at {ROOT}"
    ]
    assert out.stdout == "" and not any(tmp_path.iterdir())  # no work done


@pytest.mark.parametrize("name", sorted(TOOLS))
@pytest.mark.parametrize("count", ["0", "51"])
def test_pairs_outside_1_to_50_is_one_line(name, count):
    out = _tool(name, "--baseline", "HEAD", "--pairs", count)
    assert out.returncode == 2
    assert out.stderr.splitlines() == [f"{name}.py: error: --pairs must be 1 to 50, got {count}"]
    assert out.stdout == ""
