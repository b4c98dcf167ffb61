"""tools/share_lock_bench.py: the timer's cost of a share partition's in-flight records against the
SystemTimer's own per-task figure, in one run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("share_lock_bench", ROOT / "tools" / "share_lock_bench.py")
assert SPEC is not None and SPEC.loader is not None
share_lock_bench = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(share_lock_bench)


def test_the_bench_reports_locks_and_a_ratio_per_batch_size():
    result = share_lock_bench.run(10_000, [500, 1], 1)
    batched, single = result["rows"]
    assert (batched["batch"], batched["locks"], single["batch"], single["locks"]) == (500, 20, 1, 10_000)
    # the ratio itself is a measurement (docs/benchmarks.md), not something a test asserts
    assert batched["ratio"] > 0 and result["system_timer_ns_per_task"] > 0


def test_records_not_a_multiple_of_the_batch_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        share_lock_bench.main(["--records", "1001", "--batch", "500"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "share_lock_bench.py: error: --records (1001) must be a multiple of --batch (500)"
    ]
