"""``minibroker run --tui`` without a terminal: plain frames, no escape codes, and its one-line errors."""

from __future__ import annotations

import subprocess
import sys

from minibroker.cli import main
from minibroker.tui.plain import interval_ms
from tests.tui.helpers import ACKS_ALL, ROOT


def test_plain_frames_come_at_round_intervals_about_a_tenth_of_the_span():
    assert [interval_ms(s) for s in (0, 5, 14, 110, 150, 330, 450, 3000, 7000, 12000)] == [
        1,
        1,
        1,
        10,
        10,
        20,
        50,
        200,
        500,
        1000,
    ]


def test_tui_cannot_be_combined_with_json(capsys):
    assert main(["run", ACKS_ALL, "--tui", "--json"]) == 2
    assert capsys.readouterr().err == (
        "minibroker: --tui draws the run on the terminal: it cannot be combined with --json or --quiet\n"
    )


def test_tui_without_a_terminal_prints_plain_frames_then_the_summary():
    out = subprocess.run(
        [sys.executable, "-m", "minibroker", "run", ACKS_ALL, "--tui"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"COLUMNS": "120", "PATH": ""},
        timeout=60,
    )
    assert out.returncode == 0
    assert out.stderr == (
        "minibroker: --tui: stdout is not a terminal; printing a plain frame every 10 ms of virtual time "
        "in which something happened\n"
    )
    assert "\x1b" not in out.stdout
    rules = [
        line.strip("─ ") for line in out.stdout.splitlines() if line.startswith("───") and " at " in line
    ]
    assert rules == [
        "acks_all at 0 ms (virtual)",
        "acks_all at 10 ms (virtual)",
        "acks_all at 20 ms (virtual)",
        "acks_all at 100 ms (virtual)",
        "acks_all at the end, 110 ms (virtual)",
    ]
    assert out.stdout.rstrip().endswith("all expectations hold")
