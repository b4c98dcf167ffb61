"""DelayedOperationPurgatory on a manual SystemTimer, with exact counts: the cases of Kafka's
DelayedOperationTest, and the accounting its code implies (the armed count drops at completion, a purge
only past the interval, completion and expiry in the same ms complete once, onComplete before onExpiration).

https://github.com/apache/kafka/blob/trunk/server-common/src/test/java/org/apache/kafka/server/purgatory/DelayedOperationTest.java
"""

import pytest

from minibroker.purgatory import DelayedOperationPurgatory, TopicPartitionOperationKey
from minibroker.timer import SystemTimer
from tests.purgatory.conftest import MockOperation


def test_try_complete_runs_under_the_lock_and_watch_never_calls_safe_try_complete(purgatory, monkeypatch):
    op = MockOperation(100_000)
    calls = []
    monkeypatch.setattr(MockOperation, "safe_try_complete", lambda self: calls.append(self) or False)
    assert purgatory.try_complete_else_watch(op, ["key"]) is False
    assert op.lock_seen == [True, True]  # the two checks, both under the operation's lock
    assert calls == []
    assert not op.lock_held


def test_safe_try_complete_or_else():
    never = MockOperation(100)
    ran = []
    assert never.safe_try_complete_or_else(lambda: ran.append(1)) is False
    assert ran == [1] and never.try_calls == 2

    now = MockOperation(100)
    now.completable = True
    assert now.safe_try_complete_or_else(lambda: ran.append(2)) is True
    assert ran == [1] and now.try_calls == 1


def test_request_satisfaction(purgatory):
    assert purgatory.check_and_complete("test1") == 0
    r1, r2 = MockOperation(100_000), MockOperation(100_000)
    assert purgatory.try_complete_else_watch(r1, ["test1"]) is False
    assert purgatory.check_and_complete("test1") == 0
    assert purgatory.try_complete_else_watch(r2, ["test2"]) is False
    assert purgatory.check_and_complete("test2") == 0
    r1.completable = True
    assert purgatory.check_and_complete("test1") == 1
    assert purgatory.check_and_complete("test1") == 0
    r2.completable = True
    assert purgatory.check_and_complete("test2") == 1
    assert purgatory.check_and_complete("test2") == 0
    assert r1.log == [("complete", None)] and r2.log == [("complete", None)]


def test_completable_at_once_is_never_watched_nor_armed(purgatory, timer):
    op = MockOperation(100)
    op.completable = True
    assert purgatory.try_complete_else_watch(op, ["a", "b"]) is True
    assert (purgatory.watched(), purgatory.num_delayed(), timer.size, purgatory.estimated_total) == (
        0,
        0,
        0,
        0,
    )


def test_request_expiry_on_the_timer(timer, purgatory):
    r1, r2 = MockOperation(20, timer.now), MockOperation(200_000, timer.now)
    purgatory.try_complete_else_watch(r1, ["test1"])
    purgatory.try_complete_else_watch(r2, ["test2"])
    timer.advance_clock(19)
    assert not r1.is_completed
    timer.advance_clock(20)
    assert r1.is_completed and r1.expired and not r2.is_completed
    assert r1.log == [("complete", 20), ("expire", 20)]  # on_complete first, then on_expiration
    assert purgatory.expirations == 1 and purgatory.num_delayed() == 1


def test_request_purge_accounting(purgatory):
    r1, r2, r3 = (MockOperation(100_000) for _ in range(3))
    purgatory.try_complete_else_watch(r1, ["test1"])
    purgatory.try_complete_else_watch(r2, ["test1", "test2"])
    purgatory.try_complete_else_watch(r3, ["test1", "test2", "test3"])
    assert (purgatory.num_delayed(), purgatory.watched()) == (3, 6)

    r2.completable = True
    assert r2.try_complete() is True
    assert (purgatory.num_delayed(), purgatory.watched()) == (2, 6)  # the armed count drops at once
    r3.completable = True
    r3.try_complete()
    assert (purgatory.num_delayed(), purgatory.watched()) == (1, 6)

    purgatory.check_and_complete("test1")
    assert purgatory.watched() == 4
    purgatory.check_and_complete("test2")
    assert purgatory.watched() == 2
    assert "test2" not in purgatory.watched_keys()
    purgatory.check_and_complete("test3")
    assert purgatory.watched() == 1
    assert purgatory.watched_keys() == ["test1"]


def test_cancel_for_key(purgatory, timer):
    ops = [MockOperation(10_000) for _ in range(3)]
    purgatory.try_complete_else_watch(ops[0], ["test1"])
    purgatory.try_complete_else_watch(ops[1], ["test1"])
    purgatory.try_complete_else_watch(ops[2], ["test2"])
    cancelled = purgatory.cancel_for_key("test1")
    assert cancelled == ops[:2]
    assert (purgatory.num_delayed(), purgatory.watched(), timer.size) == (1, 1, 1)
    assert all(op.log == [] and not op.is_completed for op in cancelled)
    timer.advance_clock(20_000)
    assert [op.log for op in ops] == [[], [], [("complete", None), ("expire", None)]]


def test_cancel_for_unknown_key(purgatory):
    assert purgatory.cancel_for_key("nope") == []


def test_empty_key_list_is_an_error(purgatory):
    with pytest.raises(ValueError, match="watch key list can't be empty"):
        purgatory.try_complete_else_watch(MockOperation(10), [])


def test_purge_unlinks_stale_watchers_only_past_the_interval():
    timer = SystemTimer()
    purgatory = DelayedOperationPurgatory("mock", timer, purge_interval=0)
    op = MockOperation(1000)
    purgatory.try_complete_else_watch(op, ["k1", "k2", "k3"])
    assert purgatory.maybe_purge(0) == 0  # E=1, delayed=1: 0 is not > 0
    op.completable = True
    assert purgatory.check_and_complete("k1") == 1
    assert purgatory.watched() == 2  # two stale entries, on k2 and k3
    assert purgatory.maybe_purge(5) == 2
    assert (purgatory.watched(), purgatory.estimated_total, purgatory.purges, purgatory.last_purge) == (
        0,
        0,
        1,
        (5, 2),
    )
    assert purgatory.watched_keys() == []
    assert purgatory.maybe_purge(6) == 0 and purgatory.purges == 1


def test_purge_interval_is_strictly_greater():
    purgatory = DelayedOperationPurgatory("mock", SystemTimer(), purge_interval=2)
    ops = [MockOperation(1000) for _ in range(3)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["k", "other"])
    for op in ops[:2]:
        op.completable = True
        op.try_complete()
    assert purgatory.estimated_total - purgatory.num_delayed() == 2
    assert purgatory.maybe_purge(0) == 0 and purgatory.watched() == 6
    ops[2].completable = True
    ops[2].try_complete()
    assert purgatory.maybe_purge(0) == 6
    assert purgatory.estimated_total == 0


def test_completion_and_expiry_in_the_same_ms_complete_once(timer, purgatory):
    op = MockOperation(50, timer.now)
    purgatory.try_complete_else_watch(op, ["k"])
    timer.advance_clock(49)
    op.completable = True
    timer.advance_clock(50)  # the timer gets there first: expiry
    assert purgatory.check_and_complete("k") == 0
    assert op.log == [("complete", 50), ("expire", 50)]

    other = MockOperation(50, timer.now)
    purgatory.try_complete_else_watch(other, ["k"])
    other.completable = True
    assert purgatory.check_and_complete("k") == 1  # the event gets there first
    other.run()  # a timeout racing in afterwards changes nothing
    timer.advance_clock(100)
    assert other.log == [("complete", 50)] and not other.expired


def test_force_complete_is_a_single_gate(purgatory):
    op = MockOperation(10)
    purgatory.try_complete_else_watch(op, ["k"])
    assert op.force_complete() is True
    assert op.force_complete() is False
    assert op.log == [("complete", None)] and purgatory.num_delayed() == 0


def test_two_purgatories_share_one_timer_and_count_their_own(timer):
    produce = DelayedOperationPurgatory("Produce", timer)
    fetch = DelayedOperationPurgatory("Fetch", timer)
    key = TopicPartitionOperationKey("t", 0)
    produce.try_complete_else_watch(MockOperation(30_000), [key])
    for _ in range(2):
        fetch.try_complete_else_watch(MockOperation(500), [key])
    assert (produce.num_delayed(), fetch.num_delayed(), timer.size) == (1, 2, 3)
    timer.advance_clock(500)
    assert (produce.num_delayed(), fetch.num_delayed(), timer.size) == (1, 0, 1)
    assert (produce.expirations, fetch.expirations) == (0, 2)
    assert str(key) == "t-0"


def test_timer_disabled_never_arms(timer):
    purgatory = DelayedOperationPurgatory("mock", timer, timer_enabled=False)
    purgatory.try_complete_else_watch(MockOperation(5), ["k"])
    assert (purgatory.num_delayed(), timer.size, purgatory.watched()) == (0, 0, 1)


def test_delay_zero_expires_from_add(timer, purgatory):
    op = MockOperation(0, timer.now)
    assert purgatory.try_complete_else_watch(op, ["k"]) is False
    assert op.log == [("complete", 0), ("expire", 0)]
    assert purgatory.num_delayed() == 0 and purgatory.expirations == 1
