"""Smoke tests of tools/retry_bench.py: a tiny run of both backends; bad arguments exit 2 (2-10 s)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "retry_bench.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed (README)")
def test_a_small_run_of_both_backends_delivers_every_record_never_early():
    proc = run("--counts", "300", "--paced", "200", "--window-ms", "200", "--batch", "50", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["rows"]
    shapes = [(r["backend"], r["pending"], r["paced"]) for r in rows]
    assert shapes == [("wheel", 300, 200), ("redis", 300, 200)]
    for row in rows:  # the tool asserts every record drained and none delivered before due
        assert row["drain_per_s"] > 0 and 0 <= row["late_p50_ms"] <= row["late_p99_ms"] <= row["late_max_ms"]
        assert row["offered_per_s"] == 1000


def test_bad_arguments_exit_2_with_one_line():
    for args, message in (
        (("--counts", "10,x"), "expected comma-separated whole numbers"),
        (("--counts", "0"), "expected counts in 1..10,000,000"),
        (("--batch", "0"), "expected a whole number >= 1"),
        (("--backends", "wheel,disk"), "expected backends among wheel, redis"),
    ):
        proc = run(*args)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
