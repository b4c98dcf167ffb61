"""Hypothesis: every timer against a trivial model of armed tasks, with the inline executor.

Every task that is not cancelled fires exactly once and never before its
expiration; advanced to each next expiration, a timer fires a task at exactly
its expiration; a cancelled task never fires; ``size`` is the live count.
Tick is 1 ms: with a coarser tick Kafka's wheel fires up to a tick early, by design.

Tasks run inline (the timers' default executor) and a task's run may re-arm,
cancel, or re-arm then cancel another task (or itself), including one due in
the same flush. A flush hands all its due tasks over before the first runs (as
Kafka submits them to its executor thread): each of them runs exactly once in
that flush whatever earlier runs did to it, and what those runs did (a new
expiration, a cancel) holds afterwards.
"""

from __future__ import annotations

from typing import ClassVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from minibroker.timer import TimerTask, make_timer

#: what a task's run does to a target task: re-arm it (delay >= 1), cancel it, or both
ACTIONS = st.one_of(
    st.none(),
    st.tuples(st.sampled_from(["rearm", "cancel", "rearm_cancel"]), st.integers(0, 30), st.integers(1, 60)),
)
#: delays that often coincide, so that tasks share a flush
DELAYS = st.one_of(st.integers(0, 2500), st.sampled_from([1, 5, 10, 20, 60]))


class ModelTask(TimerTask):
    __slots__ = ("id", "expiration", "state", "fired", "model", "action")

    def __init__(self, id: int, delay_ms: int, model: TimerModel, action) -> None:
        super().__init__(delay_ms)
        self.id = id
        self.expiration = 0
        self.state = "new"  # armed | cancelled | fired
        self.fired: list[int] = []  # fire times since the task was last armed
        self.model = model
        self.action = action

    def run(self) -> None:
        self.model._fire(self)


class TimerModel(RuleBasedStateMachine):
    kind = "kafka"
    options: ClassVar[dict] = {}

    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.tasks: list[ModelTask] = []
        self.timer = make_timer(self.kind, **self.options)  # inline executor: task.run()
        self.handed: set[int] = set()  # tasks due when the current advance started, not yet run
        self.runs: list[int] = []  # task ids run by the current advance

    def _fire(self, task: ModelTask) -> None:
        current = task.state == "armed" and task.expiration <= self.now
        handed = task.id in self.handed
        assert handed or current, f"task {task.id} ran while {task.state} ({task.expiration}) at {self.now}"
        assert self.now >= task.expiration or not current
        self.handed.discard(task.id)
        self.runs.append(task.id)
        if current:  # its present arming fired (not one it had when an earlier run of the flush re-armed it)
            task.fired.append(self.now)
            task.state = "fired"
        if task.action is not None:
            kind, target, delay = task.action
            other = self.tasks[target % len(self.tasks)]
            if kind != "cancel":
                self._arm(other, delay)
            if kind != "rearm":
                self._cancel(other)

    def _arm(self, task: ModelTask, delay: int) -> None:
        task.delay_ms = delay
        task.expiration = self.now + delay
        task.state = "armed"
        task.fired = []
        self.timer.add(task)

    def _cancel(self, task: ModelTask) -> None:
        task.cancel()
        if task.state == "armed":
            task.state = "cancelled"

    def _advance(self, now: int) -> set[int]:
        """Advance the timer to ``now``; check that exactly the tasks due at the start ran, once each."""
        self.now = now
        due = {t.id for t in self.tasks if t.state == "armed" and t.expiration <= now}
        self.handed = set(due)
        self.runs = []
        self.timer.advance_clock(now)
        assert not self.handed, f"due tasks {sorted(self.handed)} did not run at {now}"
        assert sorted(self.runs) == sorted(due), (self.runs, due)
        left = [t.id for t in self.tasks if t.state == "armed" and t.expiration <= now]
        assert not left, f"tasks {left} are still armed and due after advancing to {now}"
        nxt = self.timer.next_expiration()
        assert nxt is None or nxt > now, (nxt, now)
        return due

    @rule(delay=DELAYS, action=ACTIONS)
    def add(self, delay, action):
        task = ModelTask(len(self.tasks), delay, self, action)
        self.tasks.append(task)
        self._arm(task, delay)

    @precondition(lambda self: self.tasks)
    @rule(data=st.data(), delay=DELAYS)
    def re_add(self, data, delay):
        self._arm(data.draw(st.sampled_from(self.tasks)), delay)

    @precondition(lambda self: self.tasks)
    @rule(data=st.data())
    def cancel(self, data):
        self._cancel(data.draw(st.sampled_from(self.tasks)))

    @rule()
    def advance_to_next_expiration(self):
        at = self.timer.next_expiration()
        if at is None:
            assert not [t for t in self.tasks if t.state == "armed"]
            return
        expirations = {t.id: t.expiration for t in self.tasks}
        for id in self._advance(max(self.now, at)):
            assert expirations[id] == self.now, (id, expirations[id], self.now)

    @rule(step=st.integers(1, 700))
    def advance_by(self, step):
        self._advance(self.now + step)

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
