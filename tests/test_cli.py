"""The command line: help, the timer demo, and one-line errors."""

import subprocess
import sys

from rich.console import Console

from minibroker.cli import main
from minibroker.demo import run_demo


def test_demo_replays_the_seed_example_at_exact_virtual_times():
    console = Console(record=True, width=120)
    assert run_demo([350, 450], console=console) == [(350, 350), (450, 450)]
    text = console.export_text()
    assert "task 350 ms: level 2 slot 17, bucket expires at 340 ms (350 ms left)" in text
    assert "task 450 ms: level 3 slot 1, bucket expires at 400 ms (450 ms left)" in text
    assert "task 450 ms: level 2 slot 2, bucket expires at 440 ms (50 ms left)" in text
    assert "task 450 ms: level 1 slot 10, bucket expires at 450 ms (10 ms left)" in text
    assert "t=450 ms  task 450 ms fired" in text


def test_main_runs_the_demo(capsys):
    assert main(["demo-timer", "--task", "25"]) == 0
    assert "t=25 ms  task 25 ms fired" in capsys.readouterr().out


def test_help_via_python_dash_m():
    out = subprocess.run([sys.executable, "-m", "minibroker", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "demo-timer" in out.stdout


def test_bad_argument_is_one_line_and_exit_2():
    out = subprocess.run(
        [sys.executable, "-m", "minibroker", "demo-timer", "--task", "soon"], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "minibroker demo-timer: error: argument --task: expected a whole number of ms, got 'soon' "
        "(see minibroker demo-timer --help)"
    ]
    assert "Traceback" not in out.stderr


def test_zero_tick_is_refused(capsys):
    assert main(["demo-timer", "--tick", "0"]) == 2
    assert capsys.readouterr().err == "minibroker: demo-timer: --tick and --wheel-size must be >= 1\n"
