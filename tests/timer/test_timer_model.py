"""Hypothesis: every timer against a trivial model of armed tasks.

Every task that is not cancelled fires exactly once and never before its
expiration; advanced to each next expiration, a timer fires a task at exactly
its expiration; a cancelled task never fires; ``size`` is the live count.
Tick is 1 ms: with a coarser tick Kafka's wheel fires up to a tick early, by design.
"""

from __future__ import annotations

from typing import ClassVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from minibroker.timer import TimerTask, make_timer


class ModelTask(TimerTask):
    __slots__ = ("id", "expiration", "state", "fired")

    def __init__(self, id: int, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.id = id
        self.expiration = 0
        self.state = "new"  # armed | cancelled | fired
        self.fired: list[int] = []  # fire times since the task was last armed


class TimerModel(RuleBasedStateMachine):
    kind = "kafka"
    options: ClassVar[dict] = {}

    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.tasks: list[ModelTask] = []
        self.timer = make_timer(self.kind, executor=self._fire, **self.options)

    def _fire(self, task: ModelTask) -> None:
        assert task.state == "armed", f"task {task.id} fired while {task.state}"
        assert self.now >= task.expiration, f"task {task.id} fired at {self.now} before {task.expiration}"
        task.fired.append(self.now)
        task.state = "fired"

    def _arm(self, task: ModelTask, delay: int) -> None:
        task.delay_ms = delay
        task.expiration = self.now + delay
        task.state = "armed"
        task.fired = []
        self.timer.add(task)

    @rule(delay=st.integers(0, 2500))
    def add(self, delay):
        task = ModelTask(len(self.tasks), delay)
        self.tasks.append(task)
        self._arm(task, delay)

    @precondition(lambda self: self.tasks)
    @rule(data=st.data(), delay=st.integers(0, 2500))
    def re_add(self, data, delay):
        self._arm(data.draw(st.sampled_from(self.tasks)), delay)

    @precondition(lambda self: self.tasks)
    @rule(data=st.data())
    def cancel(self, data):
        task = data.draw(st.sampled_from(self.tasks))
        task.cancel()
        if task.state == "armed":
            task.state = "cancelled"

    @rule()
    def advance_to_next_expiration(self):
        at = self.timer.next_expiration()
        if at is None:
            assert not [t for t in self.tasks if t.state == "armed"]
            return
        self.now = max(self.now, at)
        before = {t.id for t in self.tasks if t.state == "fired"}
        self.timer.advance_clock(self.now)
        for task in self.tasks:
            if task.state == "fired" and task.id not in before:
                assert task.fired == [task.expiration], (task.id, task.fired, task.expiration)

    @rule(step=st.integers(1, 700))
    def advance_by(self, step):
        self.now += step
        self.timer.advance_clock(self.now)

    @invariant()
    def due_tasks_fired_exactly_once(self):
        for task in self.tasks:
            if task.state == "armed":
                assert not task.fired
            if task.state == "fired":
                assert len(task.fired) == 1 and task.fired[0] >= task.expiration
            if task.state == "cancelled":
                assert not task.fired
        # nothing armed and due is left behind after an advance
        overdue = [t.id for t in self.tasks if t.state == "armed" and t.expiration < self.now]
        assert not overdue, overdue

    @invariant()
    def size_is_the_live_count(self):
        assert self.timer.size == sum(1 for t in self.tasks if t.state == "armed")

    @invariant()
    def wheel_buckets_hold_exactly_the_armed_entries(self):
        if self.kind != "kafka":
            return
        live = []
        for level in self.timer.timing_wheel.levels():
            for bucket in level.buckets:
                mine = [entry for entry in bucket if entry.bucket is bucket]
                assert len(bucket) - bucket.removed == len(mine) == bucket.size
                assert bucket.removed <= bucket.compact_after
                assert not mine or bucket.expiration != -1  # a bucket holding entries is queued
                live += mine
        assert sorted(entry.task.id for entry in live) == sorted(
            t.id for t in self.tasks if t.state == "armed"
        )
        assert all(entry.task._entry is entry for entry in live)


def machine(kind: str, **options):
    return type(f"{kind.title()}Model", (TimerModel,), {"kind": kind, "options": options})


SETTINGS = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestKafkaTimer = machine("kafka").TestCase
TestKafkaTimer.settings = SETTINGS
TestKafkaTimerWheelOfThree = machine("kafka", wheel_size=3).TestCase
TestKafkaTimerWheelOfThree.settings = SETTINGS
TestHeapTimer = machine("heap").TestCase
TestHeapTimer.settings = SETTINGS
TestHashedTimer = machine("hashed", wheel_size=8).TestCase
TestHashedTimer.settings = SETTINGS
