"""`minibroker chaos` end to end: a bounded default-profile run with zero violations, and bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minibroker.cli import main


def test_bounded_default_run_has_zero_violations(tmp_path, capsys):
    # 200 short schedules on 2 processes: every fault kind, every invariant checked (seed 14's run 159 is
    # the schedule scenarios/regressions/coordinator_error_backoff.toml was shrunk from)
    out = tmp_path / "out"
    status = main(
        [
            "chaos",
            "--runs",
            "200",
            "--duration-ms",
            "500",
            "--workers",
            "2",
            "--seed",
            "14",
            "--out",
            str(out),
        ]
    )
    shown = capsys.readouterr().out
    assert status == 0, shown
    lines = (out / "runs.jsonl").read_text().splitlines()
    table = [json.loads(line) for line in lines]
    assert [row["index"] for row in table] == list(range(200))
    assert sum(row["violations"] for row in table) == 0
    assert sum(row["faults"] for row in table) > 300
    assert all(
        sum(row[f"fault_{k}"] for row in table) > 20
        for k in ("pause", "latency", "drop", "crash", "shutdown", "min_isr")
    )
    assert sum(row["protected"] for row in table) > 100
    # group members in about half the runs, their faults, and commits checked by invariant 7
    assert sum(row["members"] > 0 for row in table) > 80
    assert all(sum(row[f"fault_{k}"] for row in table) > 15 for k in ("stall", "hang", "leave"))
    assert sum(row["commits"] for row in table) > 3000
    # faults on links to the controller in about 30% of the runs (seed 14's runs 150 and 230 are the
    # schedules of the regressions stale_partition_epoch_replayed and member_error_fetch_no_spin)
    assert sum(row["controller_faults"] for row in table) > 50
    report = (out / "chaos.md").read_text()
    assert "| runs | 200 |" in report and "| violations | 0 |" in report
    assert "violations by invariant" in shown


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--runs", "0"], "expected a number of runs 1..10000000, got 0"),
        (["--profile", "nope"], "invalid choice: 'nope'"),
        (["--workers", "2", "--master", "local[2]"], "not allowed with argument"),
        (["--duration-ms", "5"], "expected a duration in ms 100..3600000, got 5"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["chaos", *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_out_that_is_a_file_exits_2(tmp_path, capsys):
    path = tmp_path / "file"
    path.write_text("x")
    assert main(["chaos", "--runs", "1", "--out", str(path), "--workers", "1"]) == 2
    assert "is a file; expected a directory" in capsys.readouterr().err


def test_unclean_profile_through_the_command_shrinks_its_loss(tmp_path, capsys):
    out = tmp_path / "out"
    status = main(
        [
            "chaos",
            "--runs",
            "3",
            "--profile",
            "unclean",
            "--workers",
            "1",
            "--shrink-budget",
            "30",
            "--out",
            str(out),
        ]
    )
    assert status == 0  # losses are what this profile expects
    shrunk = out / "shrunk" / "unclean-s0-r2.toml"
    assert shrunk.is_file()
    report = (out / "chaos.md").read_text()
    assert "| expected by the profile | 2 |" in report  # run 2: the loss, and a group member read it
    assert f"| unclean-s0-r2 | {shrunk} |" in report and "| fails |" in report
    capsys.readouterr()
    assert main(["run", str(shrunk), "--quiet"]) == 1


def _children(pid: int) -> set[int]:
    """Direct children of ``pid`` (Linux /proc), alive or zombie-free."""
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(c) for c in (task / "children").read_text().split()}
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads worker pids from Linux's /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_to_the_command_leaves_no_worker_running(signum, tmp_path):
    # real processes: the command on 2 workers, signalled mid-run; each worker must be gone within
    # 10 s (it checks for its parent once a second; 10 s allows for a loaded machine)
    command = [sys.executable, "-m", "minibroker", "chaos", "--runs", "5000", "--workers", "2"]
    process = subprocess.Popen(
        [*command, "--out", str(tmp_path / "out")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        deadline = time.monotonic() + 60
        workers: set[int] = set()
        while len(workers) < 2:  # the resource tracker is a child too: wait for two more
            assert time.monotonic() < deadline, "the workers never started"
            time.sleep(0.1)
            workers = {c for c in _children(process.pid) if "spawn_main" in _cmdline(c)}
        process.send_signal(signum)
        process.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(_alive(w) for w in workers):
            assert time.monotonic() < deadline, [w for w in workers if _alive(w)]
            time.sleep(0.1)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except FileNotFoundError:
        return ""
