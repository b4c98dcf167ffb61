"""Chaos with share consumers (KIP-932): the share-group invariants on seeded runs through consumer stalls
and crashes and a broker crash, and the checker catching each broken guarantee."""

from __future__ import annotations

import pytest

from minibroker.chaos.share import (
    ALL_SETTLED,
    LOCK_ON_TIME,
    NO_DOUBLE_ACK,
    ShareChecks,
    run_share_chaos,
    share_chaos_scenario,
)
from minibroker.scenario import parse_scenario

BASE = {"broker": 1, "group": "sg", "partition": "t-0"}


def _acquire(seq, offset, last, count=1, time_ms=0):
    return {
        **BASE,
        "kind": "share.acquire",
        "seq": seq,
        "time_ms": time_ms,
        "offset": offset,
        "last_offset": last,
        "delivery_count": count,
        "member": "m",
        "deadline_ms": time_ms + 1000,
    }


def _ack(seq, offset, last, types=("ACCEPT",), time_ms=5):
    return {
        **BASE,
        "kind": "share.ack",
        "seq": seq,
        "time_ms": time_ms,
        "offset": offset,
        "last_offset": last,
        "types": list(types),
        "member": "m",
    }


def test_an_acknowledgement_twice_in_one_delivery_is_a_violation():
    checks = ShareChecks()
    for event in (_acquire(1, 0, 2), _ack(2, 0, 1), _ack(3, 1, 2)):
        checks(event)
    (violation,) = checks.violations
    assert (violation.invariant, violation.time_ms, violation.message) == (
        NO_DOUBLE_ACK,
        5,
        "offset 1 acknowledged twice in one delivery",
    )
    checks(_acquire(4, 1, 1, count=2, time_ms=1000))  # a new delivery may be acknowledged again
    checks(_ack(5, 1, 1, ("RELEASE",), time_ms=1001))
    assert len(checks.violations) == 1 and checks.tally.redelivered == 1


@pytest.mark.parametrize(("fired", "late"), [(1002, "+2"), (999, "-1")])
def test_a_lock_expiring_more_than_a_tick_late_or_early_is_a_violation(fired, late):
    checks = ShareChecks(tick_ms=1)
    checks({**BASE, "kind": "share.lock.expire", "seq": 1, "time_ms": 1001, "deadline_ms": 1000})
    checks({**BASE, "kind": "share.lock.expire", "seq": 2, "time_ms": fired, "deadline_ms": 1000})
    (violation,) = checks.violations
    assert violation.invariant == LOCK_ON_TIME
    assert violation.message == f"lock due 1000 expired at {fired} ({late} ms)"


def test_a_share_fetch_expiring_late_is_a_violation():
    checks = ShareChecks(tick_ms=1)
    op = {"broker": 1, "purgatory": "ShareFetch", "op": "ShareFetch-3"}
    checks({**op, "kind": "op.create", "seq": 1, "time_ms": 100, "delay_ms": 500})
    checks({**op, "kind": "op.complete", "seq": 2, "time_ms": 602, "cause": "expiry"})
    (violation,) = checks.violations
    assert (violation.invariant, violation.message) == (
        LOCK_ON_TIME,
        "ShareFetch-3 due 600 expired at 602 (+2 ms)",
    )


def test_the_runs_are_valid_scenarios_with_every_fault():
    text, partitions = share_chaos_scenario(3)
    scenario = parse_scenario(text, "share_chaos_3.toml")
    actions = sorted({getattr(step, "action", type(step).__name__) for step in scenario.steps})
    assert actions == ["Load", "acknowledge", "crash", "join", "restart", "stall"]
    assert partitions in (1, 2) and ALL_SETTLED == 14


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_share_consumers_through_faults_keep_every_guarantee(seed):
    violations, tally = run_share_chaos(seed)
    assert [v.message for v in violations] == []
    # every record ended: accepted, or archived (rejected, or released to the delivery limit)
    assert tally.records > 0 and tally.lock_expiries >= 1 and tally.redelivered >= 1
    assert tally.fetch_expiries >= 1  # DelayedShareFetches that expired were checked too
    assert tally.acknowledged + tally.lock_expiries >= tally.records


def test_the_share_profile_runs_share_chaos_and_reports_its_tallies():
    from minibroker.chaos import run_index
    from minibroker.chaos.share import share_run_seed

    assert (share_run_seed(0, 2), share_run_seed(1, 2), share_run_seed(2**64 - 1, 0)) == (
        2,
        10_000_002,
        (2**64 - 1) * 10_000_000 % 2**63,
    )
    outcome = run_index("share", 0, 2, 2000)  # seed 0's run 2 is share chaos scenario 2
    violations, tally = run_share_chaos(2)
    assert outcome.violations == violations == []
    row = outcome.row
    assert (row["run"], row["profile"], row["violations"], row["fault_crash"], row["fault_pause"]) == (
        "share_chaos_2",
        "share",
        0,
        1,
        0,
    )
    assert (row["share_acquired"], row["share_lock_expiries"], row["share_records"]) == (
        tally.acquired,
        tally.lock_expiries,
        tally.records,
    )
    assert row["events"] > 0 and row["requests"] > 0 and row["virtual_ms"] >= 15_000 - 1
