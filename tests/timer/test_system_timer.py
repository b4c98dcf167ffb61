"""SystemTimer: the cases of Kafka's TimerTest, cascades from overflow levels, and placement on small wheels.

https://github.com/apache/kafka/blob/trunk/server-common/src/test/java/org/apache/kafka/server/util/timer/TimerTest.java
"""

import pytest

from minibroker.timer import SystemTimer, TimerTask, TimerTaskEntry, make_timer
from minibroker.timer.task import STALE


class Recorder:
    """An executor that records (task id, time) for each task it is handed."""

    def __init__(self) -> None:
        self.timer = None
        self.ran: list[tuple[object, int]] = []

    def __call__(self, task: TimerTask) -> None:
        self.ran.append((task.id, self.timer.now()))


class IdTask(TimerTask):
    __slots__ = ("id",)

    def __init__(self, delay_ms: int, id: object = None) -> None:
        super().__init__(delay_ms)
        self.id = delay_ms if id is None else id


def make(kind="kafka", **kwargs):
    recorder = Recorder()
    timer = make_timer(kind, executor=recorder, **kwargs)
    recorder.timer = timer
    return timer, recorder


def drain(timer) -> int:
    """Advance to each next expiration until nothing is armed; return the number of advances."""
    advances = 0
    while (at := timer.next_expiration()) is not None:
        timer.advance_clock(max(at, timer.now()))
        advances += 1
    return advances


def test_already_expired_tasks_run_from_add():
    timer, rec = make(tick_ms=1, wheel_size=3)
    for delay in range(-5, 0):
        timer.add(IdTask(delay))
    assert sorted(i for i, _ in rec.ran) == [-5, -4, -3, -2, -1]
    assert timer.size == 0
    assert timer.advance_clock(0) is False


def test_expiration_of_585_tasks_across_six_levels():
    timer, rec = make(tick_ms=1, wheel_size=3)
    expected = []
    for i in range(0, 5):
        timer.add(IdTask(i))
        expected.append(i)
    for i in range(10, 100):
        for _ in range(2):
            timer.add(IdTask(i))
            expected.append(i)
    for i in range(100, 500):
        timer.add(IdTask(i))
        expected.append(i)
    assert len(expected) == 585
    levels = timer.timing_wheel.levels()
    assert [level.interval for level in levels] == [3, 9, 27, 81, 243, 729]
    drain(timer)
    assert sorted(i for i, _ in rec.ran) == expected
    assert all(at == i for i, at in rec.ran)  # each at exactly its expiration
    assert timer.size == 0


def test_tasks_350_and_450_cascade_down_from_levels_2_and_3():
    timer, rec = make()
    t350, t450 = IdTask(350), IdTask(450)
    timer.add(t350)
    timer.add(t450)
    assert timer.locate(t350) == (2, 17, 340)
    assert timer.locate(t450) == (3, 1, 400)
    assert timer.size == 2
    assert timer.next_expiration() == 340

    assert timer.advance_clock(340)
    assert timer.locate(t350) == (1, 10, 350)
    assert timer.advance_clock(350)
    assert rec.ran == [(350, 350)]

    assert timer.next_expiration() == 400
    assert timer.advance_clock(399) is False
    assert timer.advance_clock(400)
    assert timer.locate(t450) == (2, 2, 440)  # 50 ms left
    assert t450._entry.expiration_ms - 400 == 50
    assert timer.next_expiration() == 440
    timer.advance_clock(440)
    assert timer.locate(t450) == (1, 10, 450)  # 10 ms left
    timer.advance_clock(449)
    assert rec.ran == [(350, 350)]
    timer.advance_clock(450)
    assert rec.ran == [(350, 350), (450, 450)]
    assert timer.size == 0 and timer.next_expiration() is None


def test_overflow_task_fires_at_its_own_expiration_not_the_buckets():
    timer, rec = make(tick_ms=1, wheel_size=3, start_ms=1000)
    task = IdTask(10)
    timer.add(task)
    assert timer.locate(task) == (3, (1010 // 9) % 3, 1008)
    assert timer.next_expiration() == 1008
    timer.advance_clock(1008)
    assert rec.ran == []
    assert timer.locate(task) == (1, 1010 % 3, 1010)
    assert timer.timing_wheel.current_time == 1008
    assert [lvl.current_time for lvl in timer.timing_wheel.levels()] == [1008, 1008, 1008]
    timer.advance_clock(1009)
    assert rec.ran == []
    timer.advance_clock(1010)
    assert rec.ran == [(10, 1010)]


@pytest.mark.parametrize(
    ("delay", "level", "bucket_expiration"),
    [(1, 1, 1001), (2, 1, 1002), (3, 2, 1002), (7, 2, 1005), (8, 3, 1008), (10, 3, 1008), (25, 3, 1017)],
)
def test_placement_on_a_wheel_of_three_buckets(delay, level, bucket_expiration):
    timer, _ = make(tick_ms=1, wheel_size=3, start_ms=1000)
    task = IdTask(delay)
    timer.add(task)
    where = timer.locate(task)
    assert where is not None
    assert (where[0], where[2]) == (level, bucket_expiration)


def test_delay_zero_runs_at_once_when_the_wheel_is_current():
    timer, rec = make(start_ms=100)
    timer.add(IdTask(0))
    assert rec.ran == [(0, 100)]


def test_re_adding_moves_instead_of_duplicating():
    timer, rec = make()
    task = IdTask(100, id="t")
    timer.add(task)
    timer.add(task)  # same delay, new entry: the old one is removed
    assert timer.size == 1
    timer.advance_clock(10)
    task.delay_ms = 50
    timer.add(task)  # now due at 60
    assert timer.size == 1
    drain(timer)
    assert rec.ran == [("t", 60)]


def test_cancelled_task_never_runs_and_leaves_the_size():
    timer, rec = make()
    keep, drop = IdTask(30, "keep"), IdTask(30, "drop")
    timer.add(keep)
    timer.add(drop)
    assert timer.size == 2
    drop.cancel()
    assert timer.size == 1 and drop.is_cancelled
    drain(timer)
    assert rec.ran == [("keep", 30)]


def test_emptied_bucket_stays_queued_until_due_and_returns_true():
    timer, rec = make()
    task = IdTask(5)
    timer.add(task)
    task.cancel()
    assert timer.size == 0
    assert timer.next_expiration() == 5
    assert timer.advance_clock(5) is True  # Kafka: true even if every entry was cancelled
    assert rec.ran == [] and timer.next_expiration() is None


def test_fifo_within_a_bucket_and_expiration_order_across_buckets():
    timer, rec = make()
    for name, delay in [("a", 7), ("b", 3), ("c", 7), ("d", 3), ("e", 5)]:
        timer.add(IdTask(delay, name))
    timer.advance_clock(10)  # one advance flushes the three due buckets
    assert [i for i, _ in rec.ran] == ["b", "d", "e", "a", "c"]


def test_no_empty_ticks_the_clock_jumps_between_buckets():
    timer, _ = make()
    timer.add(IdTask(29_999))
    assert drain(timer) == 4  # buckets 24000 (level 4), 29600 (level 3), 29980 (level 2), 29999 (level 1)
    assert timer.timing_wheel.current_time == 29_999

    timer, _ = make()
    timer.add(IdTask(30_000))  # level 3's bucket [30000, 30400) is due at 30000 itself
    assert drain(timer) == 2


def test_snapshot_lists_levels_and_queue_head():
    timer, _ = make()
    timer.add(IdTask(350))
    timer.add(IdTask(450))
    view = timer.snapshot()
    assert view.kind == "kafka" and view.size == 2
    assert [(lvl.level, lvl.tick_ms, lvl.interval) for lvl in view.levels] == [
        (1, 1, 20),
        (2, 20, 400),
        (3, 400, 8000),
    ]
    assert [(b.index, b.expiration, b.size) for b in view.levels[1].buckets] == [(17, 340, 1)]
    assert view.queue_head == ((340, 1), (400, 1))


def test_timer_with_a_clock_arms_against_it():
    now = [500]
    timer = SystemTimer(clock=lambda: now[0])
    ran = []
    timer.executor = lambda task: ran.append(now[0])
    timer.add(TimerTask(20))
    assert timer.next_expiration() is not None
    now[0] = 520
    while (at := timer.next_expiration()) is not None and at <= now[0]:
        timer.advance_clock(now[0])
    assert ran == [520]


def test_unknown_timer_name():
    with pytest.raises(ValueError, match="unknown timer 'wheel'"):
        make_timer("wheel")


def test_repeated_expirations_reuse_a_placement_only_until_the_clock_moves():
    timer, rec = make()
    first, second = IdTask(25, "a"), IdTask(25, "b")
    timer.add(first)
    timer.add(second)  # same expiration: same level-2 bucket [20, 40)
    assert timer.locate(first) == timer.locate(second) == (2, 1, 20)
    timer.advance_clock(20)  # that bucket is due: both fall to level 1
    late = IdTask(5, "c")  # also due at 25, added after the clock moved
    timer.add(late)
    assert timer.locate(late) == timer.locate(first) == (1, 5, 25)
    timer.advance_clock(25)
    assert rec.ran == [("a", 25), ("b", 25), ("c", 25)]


def test_a_task_is_its_own_entry_from_add_until_it_runs():
    timer, rec = make()
    task = IdTask(30, "t")
    timer.add(task)
    assert task._entry is task and task.task is task
    assert task.expiration_ms == 30 and timer.locate(task) == (2, 1, 20)
    drain(timer)
    assert rec.ran == [("t", 30)]
    assert task._entry is None and task.bucket is None


def test_a_task_cancelled_and_re_added_into_the_same_bucket_runs_once_at_its_new_place():
    timer, rec = make()
    a, b = IdTask(30, "a"), IdTask(30, "b")
    timer.add(a)
    timer.add(b)
    a.cancel()
    timer.add(a)  # the bucket's list still holds ``a`` as a removed item: armed through an entry
    assert a.bucket is STALE and isinstance(a._entry, TimerTaskEntry)
    assert timer.size == 2 and timer.locate(a) == timer.locate(b) == (2, 1, 20)
    drain(timer)
    assert rec.ran == [("b", 30), ("a", 30)]
    assert a.bucket is None
    timer.add(a)  # the flush let go of the removed item: ``a`` is its own entry again
    assert a._entry is a
    drain(timer)
    assert rec.ran == [("b", 30), ("a", 30), ("a", 60)]


def test_a_task_re_armed_while_armed_moves_behind_the_tasks_added_since():
    timer, rec = make()
    a, b = IdTask(30, "a"), IdTask(30, "b")
    timer.add(a)
    timer.add(b)
    timer.add(a)
    assert timer.size == 2
    drain(timer)
    assert rec.ran == [("b", 30), ("a", 30)]


def test_compacting_a_bucket_lets_go_of_its_removed_tasks():
    timer, rec = make()
    tasks = [IdTask(30, i) for i in range(100)]
    for task in tasks:
        timer.add(task)
    for task in tasks[:90]:
        task.cancel()  # the 65th removal outnumbers the 35 live tasks: the bucket compacts once
    assert timer.size == 10
    buckets = [task.bucket for task in tasks[:90]]
    assert buckets == [None] * 65 + [STALE] * 25
    timer.add(tasks[0])
    assert tasks[0]._entry is tasks[0]
    drain(timer)
    assert [id for id, _ in rec.ran] == [*range(90, 100), 0]
