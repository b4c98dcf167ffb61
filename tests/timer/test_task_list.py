"""TimerTaskList: the shared counter, moves and cancels (Kafka's TimerTaskListTest); lazy removal.

https://github.com/apache/kafka/blob/trunk/server-common/src/test/java/org/apache/kafka/server/util/timer/TimerTaskListTest.java
"""

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from minibroker.timer import TaskCounter, TimerTask, TimerTaskEntry, TimerTaskList
from minibroker.timer.bucket import COMPACT_MIN


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


def _filled(count: int) -> tuple[TaskCounter, TimerTaskList, list[TimerTask]]:
    counter = TaskCounter()
    bucket = TimerTaskList(counter)
    tasks = [TimerTask(1) for _ in range(count)]
    for task in tasks:
        bucket.add(TimerTaskEntry(task, 1))
    return counter, bucket, tasks


def test_removed_entries_stay_until_they_outnumber_the_live_ones():
    counter, bucket, tasks = _filled(100)
    for task in tasks[:COMPACT_MIN]:
        task.cancel()
    # detached and counted, not yet dropped from the list
    assert (len(bucket), bucket.removed, bucket.size, counter.value) == (100, 64, 36, 36)
    tasks[COMPACT_MIN].cancel()  # past compact_after (64), and 65 removed > 35 live: compacted
    assert (len(bucket), bucket.removed, bucket.size, counter.value) == (35, 0, 35, 35)
    assert bucket.compact_after == 2 * 35 + COMPACT_MIN
    assert [entry.task for entry in bucket] == tasks[65:]
    flushed = []
    bucket.flush(flushed.append)
    assert [entry.task for entry in flushed] == tasks[65:]
    assert (len(bucket), bucket.removed, bucket.compact_after, counter.value) == (0, 0, COMPACT_MIN, 0)


def test_a_large_bucket_with_few_removals_is_not_scanned_but_looked_at_later():
    counter, bucket, tasks = _filled(1000)
    for task in tasks[: COMPACT_MIN + 1]:
        task.cancel()
    # 65 removed < 935 live: no compaction; the next look waits for 2 * 935 + 64 removals
    assert (len(bucket), bucket.removed, bucket.size, bucket.compact_after) == (1000, 65, 935, 1934)
    for task in tasks[COMPACT_MIN + 1 :]:
        task.cancel()
    assert (len(bucket), bucket.removed, bucket.size, counter.value) == (1000, 1000, 0, 0)
    flushed = []
    bucket.flush(flushed.append)
    assert flushed == [] and len(bucket) == 0


def test_an_entry_moved_away_and_back_is_flushed_once():
    counter = TaskCounter()
    list1, list2 = TimerTaskList(counter), TimerTaskList(counter)
    task, other = TimerTask(1), TimerTask(1)
    entry = TimerTaskEntry(task, 1)
    list1.add(entry)
    list1.add(TimerTaskEntry(other, 1))
    list2.add(entry)
    list1.add(entry)
    assert (list1.size, list2.size, counter.value) == (2, 0, 2)
    flushed = []
    list1.flush(flushed.append)
    assert [e.task for e in flushed] == [other, task]
    list2.flush(flushed.append)
    assert len(flushed) == 2 and counter.value == 0


class BucketModel(RuleBasedStateMachine):
    """Three buckets against plain lists: FIFO, removal, moves, flushes, compaction bounds."""

    def __init__(self) -> None:
        super().__init__()
        self.counter = TaskCounter()
        self.buckets = [TimerTaskList(self.counter) for _ in range(3)]
        self.model: list[list[TimerTaskEntry]] = [[], [], []]
        self.entries: list[TimerTaskEntry] = []

    def _detach(self, entry: TimerTaskEntry) -> None:
        for items in self.model:
            if entry in items:
                items.remove(entry)

    @rule(which=st.integers(0, 2), count=st.integers(1, 40))
    def add_new(self, which, count):
        for _ in range(count):
            entry = TimerTaskEntry(TimerTask(1), 1)
            self.entries.append(entry)
            self.buckets[which].add(entry)
            self.model[which].append(entry)

    @precondition(lambda self: self.entries)
    @rule(data=st.data(), which=st.integers(0, 2))
    def move(self, data, which):
        entry = data.draw(st.sampled_from(self.entries))
        if entry.cancelled():
            return  # the wheel never places a cancelled entry (and a cancel would not reach it)
        self._detach(entry)
        self.buckets[which].add(entry)
        self.model[which].append(entry)

    @precondition(lambda self: self.entries)
    @rule(data=st.data(), count=st.integers(1, 60))
    def cancel_some(self, data, count):
        for _ in range(count):
            entry = data.draw(st.sampled_from(self.entries))
            entry.task.cancel()
            self._detach(entry)

    @precondition(lambda self: self.entries)
    @rule(data=st.data())
    def remove_through_the_bucket(self, data):
        entry = data.draw(st.sampled_from(self.entries))
        for bucket in self.buckets:
            bucket.remove(entry)
        self._detach(entry)

    @rule(which=st.integers(0, 2))
    def flush(self, which):
        flushed = []
        self.buckets[which].flush(flushed.append)
        assert flushed == self.model[which]
        self.model[which] = []

    @invariant()
    def buckets_match_the_model(self):
        for bucket, items in zip(self.buckets, self.model, strict=True):
            assert bucket.entries() == items
            assert bucket.size == len(items) == len(bucket) - bucket.removed
            assert bucket.removed <= bucket.compact_after
        assert self.counter.value == sum(len(items) for items in self.model)


TestBucketModel = BucketModel.TestCase
TestBucketModel.settings = settings(max_examples=100, stateful_step_count=60, deadline=None)
