"""Smoke test of tools/group_bench.py: a small virtual-time run gives the exact rebalance times."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "group_bench.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=300)


def test_virtual_times_are_exact():
    proc = run("--members", "1,3", "--no-wire", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["wire"] is None
    rows = {row["members"]: row for row in report["virtual"]}
    # one member: the initial delay only (3000); three at once: re-armed once (6000); after a leave the
    # others hear REBALANCE_IN_PROGRESS at their next heartbeat, 3000 ms after their SyncGroup
    assert (rows[1]["stable_ms"], rows[1]["rebalance_ms"]) == (3000, 0)
    assert (rows[3]["stable_ms"], rows[3]["rebalance_ms"]) == (6000, 3000)
    assert all(row["cpu_ms_to_stable"] > 0 for row in rows.values())
    # the consumer protocol: one member is Stable at once; three joining at 0 are Stable at 5000, when the
    # first one's next heartbeat (group.consumer.heartbeat.interval.ms) revokes what the others wait
    # for; after the leave at 6000 the others hear the new epoch at their 10000 heartbeat
    consumer = {row["members"]: row for row in report["consumer"]}
    assert (consumer[1]["stable_ms"], consumer[1]["rebalance_ms"]) == (0, 0)
    assert (consumer[3]["stable_ms"], consumer[3]["rebalance_ms"]) == (5000, 4000)
    assert [row["members"] for row in report["consumer_over_classic"]] == [1, 3]


def test_bad_members_exit_2_with_one_line():
    proc = run("--members", "0,x", "--no-wire")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "group_bench: --members: expected whole numbers >= 1 like 1,10,100, got '0,x'"
    ]
