"""38 runs of ``minibroker chaos --runs 10000 --duration-ms 500 --seed 2026`` whose schedules reach the
corner cases of invariants 6 (liveness) and 7 (consumer groups) hold every invariant. Each run is a pure
function of (profile, seed, index, duration), so this replays exactly those schedules; about half a
CPU-second a run."""

from __future__ import annotations

import pytest

from minibroker.chaos.run import run_index

#: run indices of ``minibroker chaos --runs 10000 --duration-ms 500 --seed 2026`` that reach those cases
CORNER_CASE_RUNS = (
    74, 107, 713, 1343, 1373, 1577, 1941, 2876, 2998, 3114, 3189, 3337, 3392, 3444, 3803, 4204, 4399,
    4814, 5100, 5597, 5615, 6056, 6440, 6479, 6636, 7162, 7558, 7574, 7676, 7747, 7806, 8484, 8643,
    9136, 9162, 9305, 9800, 9991,
)  # fmt: skip


@pytest.mark.parametrize("index", CORNER_CASE_RUNS)
def test_a_corner_case_run_of_seed_2026_holds_every_invariant(index):
    outcome = run_index("default", 2026, index, 500)
    assert [v.line() for v in outcome.violations] == []
    assert outcome.row["faults"] > 0  # the same faulty schedule, not an empty one
