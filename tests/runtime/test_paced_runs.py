"""``run --realtime`` / ``--speed X``: the paced run is the instant run, byte for byte, only slower."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from minibroker.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _trace(tmp_path: Path, scenario: str, *pace: str) -> tuple[int, bytes, float]:
    out = tmp_path / f"{scenario}{'-'.join(pace)}.jsonl"
    started = time.perf_counter()
    path = ROOT / "scenarios" / f"{scenario}.toml"
    status = main(["run", str(path), "--quiet", "--trace", str(out), *pace])
    return status, out.read_bytes(), time.perf_counter() - started


@pytest.mark.parametrize(
    ("scenario", "pace", "span_s"),
    [
        ("acks_all", ("--realtime",), 0.110),
        ("timing_wheel_cascade", ("--speed", "1"), 0.450),
        ("follower_paused_timeout", ("--speed", "10"), 0.200),
    ],
)
def test_a_paced_run_writes_the_trace_of_the_instant_run_and_keeps_its_expectations(
    tmp_path, scenario, pace, span_s
):
    status, instant, _ = _trace(tmp_path, scenario)
    assert status == 0
    paced_status, paced, wall_s = _trace(tmp_path, scenario, *pace)
    assert paced_status == 0
    assert paced == instant
    # paced against the wall clock: the virtual span takes at least its real-time share (no upper
    # bound: a loaded machine only makes the run fall behind, which changes nothing in the trace)
    assert wall_s >= span_s


def test_demo_timer_at_a_speed_fires_each_task_at_its_expiration():
    import io

    from rich.console import Console

    from minibroker.demo import run_demo

    fired = run_demo([350, 450], speed=4.0, console=Console(file=io.StringIO()))  # ~0.11 s of real time
    assert fired == [(350, 350), (450, 450)]
