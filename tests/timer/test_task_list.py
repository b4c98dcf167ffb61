"""Reference §6 items 3-4: TimerTaskList, the shared counter, moves and cancels."""

from minibroker.timer import TaskCounter, TimerTask, TimerTaskEntry, TimerTaskList


def _size(bucket: TimerTaskList) -> int:
    seen = []
    bucket.foreach(seen.append)
    return len(seen)


def test_counter_moves_and_cancels_across_three_buckets():
    counter = TaskCounter()
    list1, list2, list3 = (TimerTaskList(counter) for _ in range(3))
    tasks = [TimerTask(10) for _ in range(10)]
    for n, task in enumerate(tasks, start=1):
        list1.add(TimerTaskEntry(task, 10))
        assert counter.value == n

    for task in tasks[:4]:
        list2.add(TimerTaskEntry(task, 10))  # a new entry for the same task moves it
    assert counter.value == 10
    assert (_size(list1), _size(list2), _size(list3)) == (6, 4, 0)

    for task in tasks[4:]:
        list3.add(TimerTaskEntry(task, 10))
    assert counter.value == 10
    assert (_size(list1), _size(list2), _size(list3)) == (0, 4, 6)

    list1.foreach(lambda task: task.cancel())
    assert (_size(list1), _size(list2), _size(list3)) == (0, 4, 6)
    list2.foreach(lambda task: task.cancel())
    assert (_size(list1), _size(list2), _size(list3)) == (0, 0, 6)
    list3.foreach(lambda task: task.cancel())
    assert (_size(list1), _size(list2), _size(list3)) == (0, 0, 0)
    assert counter.value == 0


def test_delay_counts_down_to_the_expiration():
    bucket = TimerTaskList(TaskCounter())
    now = 1_000_000
    assert bucket.set_expiration(now + 10_000) is True
    assert bucket.delay_ms(now + 5_000) == 5_000
    assert bucket.delay_ms(now + 20_000) == 0


def test_set_expiration_reports_only_a_change():
    bucket = TimerTaskList(TaskCounter())
    assert bucket.expiration == -1
    assert bucket.set_expiration(40) is True
    assert bucket.set_expiration(40) is False
    assert bucket.set_expiration(60) is True


def test_flush_is_fifo_resets_expiration_and_the_counter():
    counter = TaskCounter()
    bucket = TimerTaskList(counter)
    tasks = [TimerTask(5) for _ in range(5)]
    for task in tasks:
        bucket.add(TimerTaskEntry(task, 5))
    bucket.set_expiration(5)
    tasks[2].cancel()
    assert counter.value == 4
    flushed = []
    bucket.flush(flushed.append)
    assert [entry.task for entry in flushed] == [tasks[0], tasks[1], tasks[3], tasks[4]]
    assert all(entry.bucket is None for entry in flushed)
    assert bucket.expiration == -1
    assert counter.value == 0
    assert bucket.size == 0


def test_cancel_twice_and_cancelled_flag():
    counter = TaskCounter()
    bucket = TimerTaskList(counter)
    task = TimerTask(1)
    entry = TimerTaskEntry(task, 1)
    bucket.add(entry)
    assert not task.is_cancelled and not entry.cancelled()
    task.cancel()
    task.cancel()
    assert task.is_cancelled and entry.cancelled()
    assert counter.value == 0 and bucket.size == 0
