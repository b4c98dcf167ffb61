"""A raw TimingWheel (tick 10, size 5, start 1000): the cases of Kafka's TimingWheelTest, and a bucket
offered to the delay queue once per cycle.

https://github.com/apache/kafka/blob/trunk/server-common/src/test/java/org/apache/kafka/server/util/timer/TimingWheelTest.java
"""

import pytest

from minibroker.timer import TaskCounter, TimerTask, TimerTaskEntry, TimingWheel


@pytest.fixture
def wheel_and_queue():
    queue = []
    counter = TaskCounter()
    wheel = TimingWheel(10, 5, 1000, counter, queue.append)
    return wheel, queue, counter


def entry(expiration: int) -> TimerTaskEntry:
    return TimerTaskEntry(TimerTask(expiration), expiration)


def test_add_within_the_interval(wheel_and_queue):
    wheel, queue, counter = wheel_and_queue
    assert wheel.interval == 50
    assert wheel.add(entry(1020)) is True
    assert len(queue) == 1 and queue[0].expiration == 1020
    assert counter.value == 1


def test_add_in_the_past_is_expired(wheel_and_queue):
    wheel, queue, counter = wheel_and_queue
    assert wheel.add(entry(999)) is False
    assert queue == [] and counter.value == 0


def test_add_cancelled_is_refused(wheel_and_queue):
    wheel, _, counter = wheel_and_queue
    e = entry(1020)
    e.task.cancel()
    assert wheel.add(e) is False
    assert e.task.is_cancelled
    assert counter.value == 0


def test_add_inside_the_current_tick_is_expired(wheel_and_queue):
    wheel, _, _ = wheel_and_queue
    assert wheel.add(entry(1005)) is False
    assert wheel.add(entry(1009)) is False
    assert wheel.add(entry(1010)) is True


def test_advance_clock_rounds_down_to_the_tick(wheel_and_queue):
    wheel, _, _ = wheel_and_queue
    wheel.advance_clock(1005)
    assert wheel.current_time == 1000
    wheel.advance_clock(1010)
    assert wheel.current_time == 1010
    wheel.advance_clock(1000)
    assert wheel.current_time == 1010  # never backwards


def test_overflow_wheel_is_created_once(wheel_and_queue):
    wheel, queue, _ = wheel_and_queue
    assert wheel.overflow_wheel is None
    assert wheel.add(entry(1060)) is True
    overflow = wheel.overflow_wheel
    assert overflow is not None
    assert (overflow.tick_ms, overflow.wheel_size, overflow.interval, overflow.current_time) == (
        50,
        5,
        250,
        1000,
    )
    assert wheel.add(entry(1061)) is True
    assert wheel.overflow_wheel is overflow
    assert [bucket.expiration for bucket in queue] == [1050]  # same overflow bucket, offered once


def test_advance_clock_cascades_to_the_overflow(wheel_and_queue):
    wheel, _, _ = wheel_and_queue
    wheel.add(entry(1060))
    wheel.advance_clock(1060)
    assert wheel.current_time == 1060
    assert wheel.overflow_wheel.current_time == 1050


def test_bucket_offered_once_per_cycle_and_again_after_flush(wheel_and_queue):
    wheel, queue, counter = wheel_and_queue
    assert wheel.add(entry(1020))
    assert wheel.add(entry(1025))  # same virtual id 102: same bucket, same expiration
    assert len(queue) == 1
    bucket = queue[0]
    assert bucket.size == 2 and counter.value == 2
    wheel.advance_clock(1020)
    bucket.flush(lambda e: None)
    assert bucket.expiration == -1
    wheel.advance_clock(1030)
    assert wheel.add(entry(1070))  # 107 % 5 == 102 % 5: the same bucket, next cycle
    assert queue[-1] is bucket and len(queue) == 2
    assert bucket.expiration == 1070


def test_start_is_rounded_down_to_the_tick():
    wheel = TimingWheel(20, 20, 1037, TaskCounter(), lambda bucket: None)
    assert wheel.current_time == 1020
    with pytest.raises(ValueError):
        TimingWheel(0, 20, 0, TaskCounter(), lambda bucket: None)
