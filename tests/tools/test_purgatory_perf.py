"""Smoke tests of tools/purgatory_perf.py: small virtual-time runs, whose every count is exact."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "purgatory_perf.py"

SMALL = ["--num", "3000", "--rate", "50000", "--seed", "7", "--virtual"]
RUN_KEYS = {
    "timer",
    "rate",
    "virtual",
    "elapsed_ms",
    "target_rate",
    "actual_rate",
    "cpu_ms",
    "cpu_us_per_req",
    "wall_ms",
    "gc_collections",
    "gc_ms",
    "late_p50_ms",
    "late_p99_ms",
    "late_max_ms",
    "completed",
    "expired",
    "expected_expired",
    "purges",
    "purgatory_expirations",
    "keeps_up",
}
#: the only fields allowed to differ between two identical virtual runs
MACHINE_DEPENDENT = {"cpu_ms", "cpu_us_per_req", "wall_ms", "gc_collections", "gc_ms"}


@pytest.fixture(scope="module")
def perf():
    spec = importlib.util.spec_from_file_location("purgatory_perf", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules["purgatory_perf"] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules["purgatory_perf"]


def run_json(perf, capsys, argv):
    assert perf.main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("workload", ["low", "high"])
def test_virtual_compare_counts_are_exact(perf, workload):
    out = subprocess.run(
        [sys.executable, str(TOOL), *SMALL, "--workload", workload, "--compare", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert set(report) == {"config", "runs", "saturation"}
    assert report["saturation"] is None  # not measured in virtual time
    pct50, pct75, timeout = perf.WORKLOADS[workload]
    samples = perf.sample(perf.Workload(3000, 50000.0, pct50, pct75, timeout, 3, 100, 7))
    should_expire = sum(1 for latency in samples.latencies if latency >= timeout)
    last_end = max(a + min(lat, timeout) for a, lat in zip(samples.arrivals, samples.latencies, strict=True))
    target = round(3000 * 1000 / samples.arrivals[-1], 1)
    runs = report["runs"]
    assert [run["timer"] for run in runs] == ["kafka", "heap"]
    for run in runs:
        assert set(run) == RUN_KEYS
        assert run["virtual"] is True
        assert run["completed"] + run["expired"] == 3000
        assert run["expired"] == run["expected_expired"] == run["purgatory_expirations"] == should_expire
        assert run["late_p50_ms"] == run["late_p99_ms"] == run["late_max_ms"] == 0
        assert run["elapsed_ms"] == last_end
        assert run["target_rate"] == run["actual_rate"] == target
        assert run["keeps_up"] is True
        assert run["purges"] >= 1
    assert 0 < should_expire < 3000


def test_virtual_runs_are_deterministic(perf, capsys):
    argv = [*SMALL, "--workload", "high", "--timer", "hashed"]
    first, second = run_json(perf, capsys, argv), run_json(perf, capsys, argv)
    (a,), (b,) = first["runs"], second["runs"]
    assert {k: v for k, v in a.items() if k not in MACHINE_DEPENDENT} == {
        k: v for k, v in b.items() if k not in MACHINE_DEPENDENT
    }


def test_text_output_has_kafka_comment_lines_and_one_data_line_per_run(perf, capsys):
    argv = ["--num", "3000", "--seed", "7", "--virtual", "--workload", "low", "--rates", "50000,20000"]
    assert perf.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("# latency samples: pct75 = ")
    assert lines[2].startswith("# interval samples: rate = ")
    header = next(line for line in lines if line.startswith("# elapsed ms\t"))
    data = [line.split("\t") for line in lines if not line.startswith("#")]
    assert len(data) == 2
    assert all(len(row) == len(header.split("\t")) == len(perf.COLUMNS) for row in data)
    assert [row[-2:] for row in data] == [["kafka", "20000"], ["kafka", "50000"]]
    assert lines[-1] == "# saturation: not measured in virtual time (actual = target by construction)"


@pytest.mark.parametrize(
    "argv",
    [
        ["--num", "0", "--rate", "100", "--workload", "low"],
        ["--num", "10", "--rate", "-5", "--workload", "low"],
        ["--num", "10", "--rate", "100"],
        ["--num", "10", "--rate", "100", "--pct50", "60", "--pct75", "20", "--timeout", "200"],
        ["--num", "10", "--workload", "low"],
        ["--num", "10", "--rate", "100", "--rates", "100,200", "--workload", "low"],
        ["--num", "10", "--rates", "100,x", "--workload", "low"],
        ["--num", "10", "--rate", "100", "--workload", "low", "--timer", "wheel"],
        ["--num", "10", "--rate", "100", "--workload", "low", "--timer", "heap", "--compare"],
        ["--num", "10", "--rate", "100", "--workload", "low", "--timeout", "-1"],
    ],
)
def test_bad_arguments_exit_2_with_one_line(perf, capsys, argv):
    with pytest.raises(SystemExit) as exc:
        perf.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("purgatory_perf.py: error: ")
    assert "Traceback" not in err
