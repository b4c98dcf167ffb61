"""Smoke tests of tools/timer_bench.py: a tiny run of every workload and timer, whose counts are exact."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "timer_bench.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=300)


def test_a_small_run_fires_the_scheduled_sets_on_every_timer():
    proc = run("--size", "2000", "--no-memory", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is True
    assert report["config"]["size"] == 2000
    workloads = report["workloads"]
    assert list(workloads) == ["W1", "W2", "W3"]
    # W1: exactly 1% expire; W2: everything fires; W3: K = 1 add+cancel pair per step for 2,000 steps
    assert {w: workloads[w]["ops"] for w in workloads} == {"W1": 2000, "W2": 2000, "W3": 2000}
    expected_fired = {"W1": 20, "W2": 2000}
    for name, workload in workloads.items():
        assert workload["fired_agree"] is True and workload["problems"] == []
        results = workload["results"]
        assert list(results) == ["kafka", "heap", "hashed", "floor"]
        fired = {results[t]["fired"] for t in ("kafka", "heap", "hashed")}
        digests = {results[t]["digest"] for t in ("kafka", "heap", "hashed")}
        assert len(fired) == 1 and len(digests) == 1
        if name in expected_fired:
            assert fired == {expected_fired[name]}
        assert results["heap"]["vs_heap"] == 1.0
        assert workload["verdict"] in {"PASS", "MISS"}
        assert workload["target_kafka_vs_heap"] == {"W1": 0.5, "W2": 0.4, "W3": 0.4}[name]
    # W2 drains everything; W1 drains too; W3 leaves the churned population armed
    armed_after = {name: w["results"]["kafka"]["armed_after"] for name, w in workloads.items()}
    assert armed_after["W1"] == armed_after["W2"] == 0
    assert armed_after["W3"] == workloads["W3"]["results"]["heap"]["armed_after"] > 0


def test_bad_arguments_exit_with_one_line():
    proc = run("--workloads", "W9")
    assert proc.returncode == 2
    assert "unknown workloads ['W9']" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = run("--size", "10")
    assert proc.returncode == 2 and "--size must be >= 1000" in proc.stderr
