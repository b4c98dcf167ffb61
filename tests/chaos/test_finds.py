"""The checker can fail: unclean losses and a planted bug are found, shrunk, and replayed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from minibroker.chaos import run_index
from minibroker.chaos.distribute import RunSummary
from minibroker.chaos.failures import replay_fails, write_shrunk
from minibroker.cli import main
from minibroker.scenario import load_scenario, run_scenario

REGRESSIONS = sorted((Path(__file__).resolve().parents[2] / "scenarios" / "regressions").glob("*.toml"))


def summary(outcome, index):
    return RunSummary(index, outcome.row, tuple(outcome.violations), tuple(outcome.expected))


def test_unclean_profile_finds_a_loss_and_shrinks_it_to_a_file_that_replays_it(tmp_path, capsys):
    # runs 0..3 of seed 0 hold at least one loss (run 2 loses an acknowledged request)
    found = []
    for index in range(4):
        outcome = run_index("unclean", 0, index, 2000)
        assert outcome.violations == []  # losses are expected findings in this profile, not failures
        found += [(index, outcome, v) for v in outcome.expected if v.invariant == 2]
    assert found
    index, outcome, loss = found[0]
    assert "was acknowledged" in loss.message and "unclean election at" in loss.message
    shrunk = write_shrunk("unclean", 0, summary(outcome, index), loss, 2000, tmp_path, budget=60)
    assert shrunk.replay_fails
    assert shrunk.produces < len(outcome.schedule.produces)
    assert shrunk.faults <= len(outcome.schedule.faults)
    result = run_scenario(load_scenario(shrunk.path))
    failed = [r for r in result.results if not r.passed]
    assert any("fetch.response" in r.expected for r in failed)  # the acknowledged batch is not there
    assert main(["run", shrunk.path, "--quiet"]) == 1
    assert "FAIL" in capsys.readouterr().err


def test_a_planted_bug_is_caught_and_shrunk(tmp_path):
    outcome = run_index("default", 0, 1, 1000, plant="hw-ahead")
    first = outcome.violations[0]
    assert first.invariant == 4
    assert "is above the LEO 0 of ISR member" in first.message
    assert run_index("default", 0, 1, 1000).violations == []  # the same run without the bug is clean
    shrunk = write_shrunk(
        "default", 0, summary(outcome, 1), first, 1000, tmp_path, budget=40, plant="hw-ahead"
    )
    # one append is enough: the probe's, once every chaos request and fault is shrunk away
    assert shrunk.replay_fails and shrunk.faults == 0 and shrunk.produces == 0
    assert not replay_fails(Path(shrunk.path))  # without the planted bug the file passes


def test_a_fetch_completed_before_min_bytes_is_caught_and_shrunk(tmp_path):
    # run 0: group member m0 waits for fetch.min.bytes 2000; the planted DelayedFetch answers on a first byte
    outcome = run_index("default", 0, 0, 1000, plant="fetch-early")
    first = outcome.violations[0]
    assert (first.invariant, first.partition, first.time_ms) == (1, "t0-0,t1-0", 335)
    assert first.message == (
        "Fetch operation m0#1 on broker 0 completed on its condition with 231 bytes below the HW "
        "(t0-0 from 0 to HW 0; t1-0 from 0 to HW 5), short of fetch.min.bytes 2000"
    )
    assert {v.invariant for v in outcome.violations} == {1}
    assert run_index("default", 0, 0, 1000).violations == []  # the same run without the bug is clean
    shrunk = write_shrunk(
        "default", 0, summary(outcome, 0), first, 1000, tmp_path, budget=40, plant="fetch-early"
    )
    assert shrunk.replay_fails and shrunk.faults == 0
    assert not replay_fails(Path(shrunk.path))  # without the planted bug the file passes


def test_regression_scenarios_pass():
    # through the CLI, in a subprocess: some of them guard against livelocks, so a hang must fail too
    assert len(REGRESSIONS) >= 3
    for path in REGRESSIONS:
        out = subprocess.run(
            [sys.executable, "-m", "minibroker", "run", str(path), "--quiet"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, (path.name, out.stderr)


def test_acks1_profile_counts_acks1_losses_without_violations():
    # run 5 of seed 0: a follower paused within the lag, the leader crashed, acks=1 records gone
    outcome = run_index("acks1", 0, 5, 1000)
    assert outcome.violations == [] and outcome.expected == []
    assert outcome.tally.acks1_lost == 1
    assert any(f.kind == "pause" for f in outcome.schedule.faults)
