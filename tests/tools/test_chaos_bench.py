"""tools/chaos_bench.py: a tiny run prints its figures, with exact counts where they are exact."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "chaos_bench.py"


def test_a_small_bench_run_reports_figures():
    out = subprocess.run(
        [sys.executable, str(TOOL), "--runs", "2", "--duration-ms", "300", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout)
    assert figures["runs"] == 2 and figures["violations"] == 0
    assert figures["runs_per_cpu_minute"] > 0 and figures["client_requests_per_cpu_s"] > 0


def test_bad_arguments_exit_2():
    out = subprocess.run(
        [sys.executable, str(TOOL), "--runs", "0"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and "--runs and --workers must be >= 1" in out.stderr
