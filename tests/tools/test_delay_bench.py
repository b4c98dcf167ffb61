"""Smoke tests of tools/delay_bench.py: tiny runs whose counts and bounds are exact; bad arguments exit 2."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "delay_bench.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=600)


def test_a_small_run_delivers_everything_within_each_designs_bound():
    designs = "timer,wheel,wheel-one-slot,levels"
    proc = run("--designs", designs, "--counts", "300", "--levels-count", "200", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {row["design"]: row for row in json.loads(proc.stdout)}
    assert {d: (r["count"], r["delivered"]) for d, r in rows.items()} == {
        "timer": (300, 300),
        "wheel": (300, 300),
        "wheel-one-slot": (300, 300),
        "levels": (200, 200),
    }
    assert rows["timer"]["lateness_max_ms"] == 0  # tick 1 ms: every task at its expiration
    assert rows["wheel"]["lateness_p50_ms"] >= 0 and rows["wheel"]["lateness_max_ms"] <= 999  # one tick
    assert rows["wheel-one-slot"]["lateness_max_ms"] <= 999
    assert rows["levels"]["lateness_max_ms"] <= 3_600_000  # at most the gap below the 2h level


def test_bad_arguments_exit_2_with_one_line():
    for args, message in (
        (("--designs", "timer,redis"), "expected designs among timer, wheel, wheel-one-slot, levels"),
        (("--counts", "10,x"), "expected counts like 100000,1000000"),
        (("--serve", "--rate", "0"), "argument --rate: expected a whole number >= 1, got '0'"),
        (("--serve", "--designs", "timer"), "--serve: expected designs among wheel, levels"),
    ):
        proc = run(*args)
        assert proc.returncode == 2
        assert message in proc.stderr


def test_serve_delivers_every_message_once_through_both_designs():
    """Real time through ``minibroker serve`` with confluent-kafka: every message delivered, none twice."""
    proc = run("--serve", "--rate", "200", "--seconds", "1", "--delay-ms", "500", "--hold", "100", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {row["design"]: row for row in json.loads(proc.stdout)}
    assert {d: (r["count"], r["acked"], r["delivered"], r["duplicates"]) for d, r in rows.items()} == {
        "wheel": (200, 200, 200, 0),
        "levels": (200, 200, 200, 0),
    }
    assert all(r["lateness_p50_ms"] is not None and r["held"] == 100 for r in rows.values())
