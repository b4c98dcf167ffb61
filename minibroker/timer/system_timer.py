"""SystemTimer: Kafka's timer, a hierarchical timing wheel over a delay queue of buckets.

``add(task)`` arms a task at ``now + task.delay_ms``. The entry goes into the
wheel; if the wheel refuses it as already expired it is handed to the executor
at once, and if it was cancelled it is dropped.

``advance_clock(now)`` pops every bucket whose expiration is ``<= now`` from the
delay queue (a heap of buckets ordered by start-of-tick expiration, ties in
offer order), advances the wheel to that expiration, and reinserts each of the
bucket's entries from the bottom level: an entry either falls into a finer
bucket or is expired and goes to the executor. The clock therefore jumps from
one non-empty bucket to the next; it never ticks through empty time, and it may
lag behind ``now`` (it stops at the last flushed bucket, as Kafka's does).

Due tasks reach the executor in FIFO order: insertion order within a bucket,
expiration order across buckets. The tasks of one flush are unbound while it is
collected and submitted as one batch after the wheel is consistent again, so a
task may add or cancel tasks from ``run``: re-arming or cancelling a later task
of the same batch binds or cancels that task for the future but does not take
back its run (Kafka has already submitted it to its executor thread). Buckets
that such runs make due (a task armed at ``now`` lands in a bucket while the
wheel lags) are flushed before ``advance_clock`` returns. The default executor
runs a task inline; the trio runtime passes one that queues it to its single
executor task (Kafka's single-thread executor).

A task is its own entry (``TimerTask.bucket``) unless a bucket's list still holds
it as a removed item; then it is armed through a ``TimerTaskEntry``. A removed
entry (its task cancelled or re-armed) stays in its bucket's list until the bucket
is flushed or compacted (``TimerTaskList``); the flush keeps separate entries, when
nothing else refers to them, as spares that later ``add`` calls fill in instead
of allocating. Entries released in bulk at a flush would leave the cyclic GC's
allocation count high (releases only lower it down to zero) and trigger extra
collections; reused ones are never allocated.

Time is integer milliseconds, due when ``now >= expiration`` (Kafka's SystemTimer
rule, not MockTimer's strict ``>``). Without a ``clock`` the timer is manual:
``now`` is the latest value given to ``advance_clock`` (``start_ms`` before that).

Invariants: ``size`` is the number of entries in buckets (not cancelled, not
yet handed to the executor); each bucket is in the delay queue at most once,
exactly while its expiration is not -1; a task handed to the executor was
unbound from its entry before any task of its batch ran (so a fired task holds
no reference cycle, and a binding made by a run of the batch is never undone);
when ``advance_clock(now)`` returns, no queued bucket expires at or before ``now``.
"""

from __future__ import annotations

import heapq
import itertools
import sys
from collections.abc import Callable

from minibroker.timer.base import Clock, Executor, TimerBase, task_label
from minibroker.timer.bucket import COMPACT_MIN, TaskCounter, TimerTaskList
from minibroker.timer.snapshot import BucketView, LevelView, TimerView
from minibroker.timer.task import STALE, BareEntry, TimerTask, TimerTaskEntry
from minibroker.timer.wheel import TimingWheel

#: removed entries a timer keeps for reuse
SPARE_MAX = 4096


class SystemTimer(TimerBase):
    """Kafka's SystemTimer with tick 1 ms and 20 buckets per level by default."""

    name = "kafka"

    def __init__(
        self,
        tick_ms: int = 1,
        wheel_size: int = 20,
        start_ms: int = 0,
        *,
        clock: Clock | None = None,
        executor: Executor | None = None,
        on_earlier_expiration: Callable[[int], object] | None = None,
    ) -> None:
        super().__init__(start_ms, clock, executor, on_earlier_expiration)
        self._counter = TaskCounter()
        self._queue: list[tuple[int, int, TimerTaskList]] = []
        self._seq = itertools.count()
        self.timing_wheel = TimingWheel(tick_ms, wheel_size, start_ms, self._counter, self._offer)
        #: removed entries nothing else refers to, collected by flushes for ``add`` to reuse
        self._spare: list[TimerTaskEntry] = []

    def _offer(self, bucket: TimerTaskList) -> None:
        queue = self._queue
        expiration = bucket.expiration
        heapq.heappush(queue, (expiration, next(self._seq), bucket))
        if queue[0][2] is bucket and self.on_earlier_expiration is not None:
            self.on_earlier_expiration(expiration)

    def add(self, task: TimerTask) -> None:
        """Arm ``task`` to expire at now + delay_ms (moving it if it was armed already).

        The task is its own entry unless a bucket's list still holds it (``TimerTask.bucket``);
        ``TimingWheel.add`` inlined: one Python frame per add (two when its bucket is offered to
        the delay queue).
        """
        clock = self.clock
        expiration = task.delay_ms + (self._now if clock is None else clock())
        old = task._entry
        if old is not None:
            old.remove()  # an entry, or the task itself as its own entry
        if task.bucket is None:
            entry = task  # its own entry: nothing to allocate
        else:
            # a bucket's list still holds the task itself (STALE): arm it through a separate entry
            spare = self._spare
            entry = spare.pop() if spare else BareEntry()
            entry.task = task
        task._entry = entry
        wheel = self.timing_wheel
        if expiration == wheel._last_expiration:
            # a burst of equal expirations shares one int object (less to free later)
            entry.expiration_ms = wheel._last_expiration
            bucket = wheel._last_bucket
        else:
            entry.expiration_ms = expiration
            if expiration < wheel._due_before:
                entry.bucket = None
                if self.tracer is not None:
                    self._trace_fire(task, expiration)
                task._entry = None  # fired: unbind (no task <-> entry cycle left for the GC)
                self.executor(task)
                return
            # TimingWheel.place inlined
            level = wheel
            while expiration >= level._limit:
                level = level.overflow_wheel or level._add_overflow_wheel()
            tick = level.tick_ms
            virtual_id = expiration // tick
            bucket = wheel._last_bucket = level.buckets[virtual_id % level.wheel_size]
            wheel._last_expiration = expiration
            start = virtual_id * tick
            if bucket.expiration != start:
                bucket.expiration = start
                self._offer(bucket)
        bucket.append(entry)
        entry.bucket = bucket
        if self.tracer is not None:
            self._trace_entry("timer.add", entry)

    def advance_clock(self, now_ms: int) -> bool:
        """Flush every bucket due at ``now_ms``; True if at least one bucket was due.

        On return no queued bucket is due: a task run inline may arm a task due at ``now_ms``
        that the wheel, whose clock stops at the last flushed bucket, places in a bucket
        instead of refusing it; such buckets are flushed in a further round.
        """
        self._observe(now_ms)
        queue = self._queue
        if not queue or queue[0][0] > now_ms:
            return False
        while True:
            self._flush_due(queue, now_ms)
            if not queue or queue[0][0] > now_ms:
                return True

    def _flush_due(self, queue: list[tuple[int, int, TimerTaskList]], now_ms: int) -> None:
        """Pop the buckets due at ``now_ms``, then hand their due tasks to the executor as one batch.

        Every due task is unbound while the batch is collected, before any of them runs (Kafka
        submits them all to its executor during the flush): a run that re-arms or cancels a later
        task of the batch changes that task's binding, not the batch.
        """
        wheel = self.timing_wheel
        offer = self._offer
        pop = heapq.heappop
        tracing = self.tracer is not None
        due: list[TimerTask] = []
        due_at: list[int] = []
        spare = self._spare
        bare = BareEntry
        stale = STALE
        refcount = sys.getrefcount
        while queue and queue[0][0] <= now_ms:
            expiration, _, bucket = pop(queue)
            wheel.advance_clock(expiration)
            expired_before = wheel._due_before
            # TimerTaskList.drain, then the wheel's add from the bottom level (inlined: a
            # removed entry is skipped, an expired one is due, the rest fall to a finer bucket).
            # Emptying the list first lets the finer buckets grow into the memory it held.
            entries = list(bucket)
            bucket.clear()
            bucket.removed = 0
            bucket.compact_after = COMPACT_MIN
            bucket.expiration = -1
            last_expiration = None
            target = bucket
            placed = {}  # expiration -> bucket, for this bucket's entries (their clock is fixed)
            for entry in entries:
                held = entry.bucket
                if held is not bucket:
                    # removed (cancelled, or its task re-armed): a task that was its own entry is free
                    # to be one again; a separate entry is kept for reuse when only this list and this
                    # loop refer to it, else dropped with the list
                    if held is stale:
                        entry.bucket = None
                    elif type(entry) is bare and len(spare) < SPARE_MAX and refcount(entry) == 3:
                        entry.task = None
                        spare.append(entry)
                    continue
                at = entry.expiration_ms
                if at < expired_before:
                    entry.bucket = None
                    if type(entry) is bare:
                        entry = entry.task
                    entry._entry = None  # handed over: unbind (no task <-> entry cycle for the GC)
                    due.append(entry)
                    if tracing:
                        due_at.append(at)
                    continue
                if at != last_expiration:
                    target = placed.get(at)
                    if target is None:
                        # TimingWheel.place inlined (the clock does not move during a flush)
                        level = wheel
                        while at >= level._limit:
                            level = level.overflow_wheel
                        tick = level.tick_ms
                        virtual_id = at // tick
                        target = placed[at] = level.buckets[virtual_id % level.wheel_size]
                        start = virtual_id * tick
                        if target.expiration != start:
                            target.expiration = start
                            offer(target)
                    last_expiration = at
                target.append(entry)
                entry.bucket = target
                if tracing:
                    self._trace_entry("timer.reinsert", entry, expiration)
        executor = self.executor
        if tracing:
            for task, at in zip(due, due_at, strict=True):
                self._trace_fire(task, at)
                executor(task)
        else:
            for task in due:
                executor(task)

    def _trace_entry(self, kind: str, entry: TimerTaskEntry, from_bucket: int | None = None) -> None:
        bucket = entry.bucket
        assert self.tracer is not None
        self.tracer.emit(
            kind,
            **self.trace_context,
            op=task_label(entry.task),
            expiration=entry.expiration_ms,
            level=bucket.level,
            slot=bucket.index,
            bucket=bucket.expiration,
            left_ms=entry.expiration_ms - self.timing_wheel.current_time,
            **({} if from_bucket is None else {"from_bucket": from_bucket}),
        )

    def _trace_fire(self, task: TimerTask, expiration: int) -> None:
        assert self.tracer is not None
        self.tracer.emit("timer.fire", **self.trace_context, op=task_label(task), expiration=expiration)

    def next_expiration(self) -> int | None:
        """Expiration of the head bucket of the delay queue, or None when it is empty."""
        return self._queue[0][0] if self._queue else None

    @property
    def size(self) -> int:
        """Entries armed in the wheel (Kafka's taskCounter)."""
        return self._counter.value

    def locate(self, task: TimerTask) -> tuple[int, int, int] | None:
        """Where ``task`` sits: (level from 1, slot, bucket expiration), or None if not armed."""
        entry = task._entry
        bucket = None if entry is None else entry.bucket
        if bucket is None:
            return None
        return bucket.level, bucket.index, bucket.expiration

    def snapshot(self, queue_head: int = 8) -> TimerView:
        """Plain data of the levels, their non-empty or queued buckets, and the queue head."""
        levels = []
        for number, wheel in enumerate(self.timing_wheel.levels(), start=1):
            buckets = tuple(
                BucketView(index, bucket.expiration, bucket.size)
                for index, bucket in enumerate(wheel.buckets)
                if bucket.size or bucket.expiration != -1
            )
            levels.append(
                LevelView(
                    number,
                    wheel.tick_ms,
                    wheel.wheel_size,
                    wheel.interval,
                    wheel.current_time,
                    buckets,
                )
            )
        head = tuple(
            (expiration, bucket.size) for expiration, _, bucket in heapq.nsmallest(queue_head, self._queue)
        )
        return TimerView(self.name, self._now, self.size, tuple(levels), head)
