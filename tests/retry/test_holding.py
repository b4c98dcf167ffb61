"""The service's holdings: commit points (LowWater), a revoked partition's records dropped, and the redis
scheduler's batching and tombstones (a record read twice is scheduled once)."""

from __future__ import annotations

import subprocess
import sys

from minibroker.retry import headers as h
from minibroker.retry.holding import Held, LowWater, RedisHolding, WheelHolding
from minibroker.retry.redis_scheduler import RedisScheduler
from tests.retry.service_helpers import ROOT


def _record(i: int) -> h.RetryRecord:
    return h.RetryRecord(f"k{i}".encode(), b"v", 0, {h.ORIGINAL_OFFSET: i, h.ATTEMPT: 1})


def test_low_water_commits_below_the_lowest_unfinished_offset():
    marks = LowWater()
    for offset in range(5):
        marks.add("p0", offset)
    marks.finish("p0", 1), marks.finish("p0", 2)
    assert marks.commit_point("p0") == 0
    marks.finish("p0", 0)
    assert marks.commit_point("p0") == 3
    marks.finish("p0", 4)
    assert marks.commit_point("p0") == 3
    marks.finish("p0", 3)
    assert marks.commit_point("p0") == 5
    marks.forget("p0")
    assert marks.commit_point("p0") is None and marks.partitions() == []


def test_wheel_holding_is_due_only_and_drops_a_revoked_partition():
    holding = WheelHolding(now_ms=0)
    holding.hold([Held("a", 0, _record(0), 10), Held("b", 0, _record(1), 20), Held("a", 1, _record(2), 30)])
    assert holding.claim(9, 10) == [] and holding.commit_points() == {"a": 0, "b": 0}
    (first,) = holding.claim(10, 10)
    assert first.record.key == b"k0"
    holding.done([first])
    assert holding.commit_points() == {"a": 1, "b": 0}
    holding.revoke(["b"])  # its next owner reads it again from offset 0
    assert holding.claim(20, 10) == [] and holding.commit_points() == {"a": 1}
    (last,) = holding.claim(30, 10)
    holding.done([last])
    assert holding.commit_points() == {"a": 2} and holding.pending() == 0


def test_redis_schedules_in_chunks_and_a_done_record_is_not_scheduled_again(redis_client):
    scheduler = RedisScheduler(redis_client, "t", batch=1000)
    records = [_record(i) for i in range(2500)]  # three SCHEDULE scripts in one pipeline
    assert scheduler.schedule_many((r, i) for i, r in enumerate(records)) == 2500
    assert scheduler.schedule_many([(records[0], 0)]) == 0  # already scheduled
    claimed = scheduler.claim_due(999)
    assert len(claimed) == 1000 and claimed[0] == records[0]
    assert scheduler.schedule_many((r, 0) for r in claimed) == 0  # in flight: not again
    scheduler.done(claimed)
    assert scheduler.schedule_many((r, 0) for r in claimed) == 0  # tombstoned: not again
    assert redis_client.zcard("t:done") == 1000 and scheduler.pending() == 1500
    scheduler.release(scheduler.claim_due(1000), due_ms=5000)  # k1000's produce failed: due again later
    assert scheduler.claim_due(1000) == []
    rest = scheduler.claim_due(10**6) + scheduler.claim_due(10**6)
    assert len(rest) == 1500 and rest[-1] == records[1000]  # now the latest due
    forgetful = RedisScheduler(redis_client, "u", dedup_ms=0)
    forgetful.schedule(records[0], 0)
    forgetful.done(forgetful.claim_due(0))
    assert forgetful.schedule_many([(records[0], 0)]) == 1 and redis_client.zcard("u:done") == 0


def test_redis_holding_commits_what_is_in_the_sorted_set(redis_client):
    holding = RedisHolding(RedisScheduler(redis_client, "c"))
    holding.hold([Held("a", 7, _record(0), 10), Held("a", 8, _record(1), 10), Held("b", 3, _record(2), 99)])
    assert holding.commit_points() == {"a": 9, "b": 4}
    assert [held.record.key for held in holding.claim(10, 10)] == [b"k0", b"k1"]
    assert holding.recover(now_ms=10, lease_ms=5) == 0 and holding.recover(now_ms=15, lease_ms=5) == 2


def test_the_service_loads_without_the_emulator():
    code = (
        "import sys, minibroker.retry.service, minibroker.retry_service; "
        "print(sorted(m for m in sys.modules "
        "if m.startswith(('minibroker.broker', 'minibroker.clients', 'minibroker.sim', 'trio'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def _handed_off(offset: int, due: int) -> h.RetryRecord:
    """A hand-off of delivery 2 of the record first consumed at orders[0]@offset (its own due time)."""
    fields = {h.ORIGINAL_TOPIC: "orders", h.ORIGINAL_PARTITION: 0, h.ORIGINAL_OFFSET: offset, h.ATTEMPT: 2}
    return h.RetryRecord(b"k", b"v", due, {**fields, h.DUE: due})


def test_wheel_holding_takes_a_twin_hand_off_for_a_duplicate_held_or_just_delivered():
    holding = WheelHolding(now_ms=0)
    holding.hold([Held("r2", 0, _handed_off(5, 100), 100), Held("r2", 1, _handed_off(5, 140), 140)])
    assert holding.pending() == 1 and holding.duplicates == 1
    (claimed,) = holding.claim(200, 10)
    holding.done([claimed])
    assert holding.commit_points() == {"r2": 2}  # the twin's offset counts as finished
    holding.hold([Held("r2", 2, _handed_off(5, 300), 300)])  # a late twin: its first was delivered
    assert holding.pending() == 0 and holding.duplicates == 2 and holding.commit_points() == {"r2": 3}


def test_wheel_holding_does_not_take_a_revoked_partitions_record_for_a_twin():
    holding = WheelHolding(now_ms=0)
    holding.hold([Held("r2", 0, _handed_off(7, 100), 100)])
    holding.revoke(["r2"])  # dropped: the partition's next owner (this instance again) reads it again
    holding.hold([Held("r2", 0, _handed_off(7, 100), 100)])
    assert holding.duplicates == 0
    assert [held.offset for held in holding.claim(200, 10)] == [0]
