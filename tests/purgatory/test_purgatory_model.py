"""Hypothesis: every delayed operation completes exactly once, against a model of the purgatory.

Random operations watched on random key sets, external events that make some
completable, check_and_complete on random keys, cancel_for_key, direct
try_complete calls, purge checks, and clock advances that land exactly on
expirations, with completion and expiry in the same millisecond included.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from minibroker.purgatory import DelayedOperation, DelayedOperationPurgatory
from minibroker.timer import SystemTimer

KEYS = ["k0", "k1", "k2", "k3", "k4"]


class Op(DelayedOperation):
    __slots__ = ("id", "model", "completable", "expiration", "events", "watched_keys", "armed")

    def __init__(self, id: int, delay_ms: int, model: PurgatoryModel) -> None:
        super().__init__(delay_ms)
        self.id = id
        self.model = model
        self.completable = False
        self.expiration = model.now + delay_ms
        self.events: list[tuple[str, int]] = []
        self.armed = False

    def try_complete(self) -> bool:
        return self.force_complete() if self.completable else False

    def on_complete(self) -> None:
        now = self.model.now
        if self.armed:  # cancel_for_key disarms: such an operation may complete any time later
            assert now <= self.expiration, (
                f"op {self.id} completed at {now}, after expiring at {self.expiration}"
            )
        assert self.completable or self.model.expiring, f"op {self.id} completed before its condition"
        self.events.append(("complete", now))

    def on_expiration(self) -> None:
        assert self.events and self.events[-1][0] == "complete", "on_expiration before on_complete"
        assert self.model.now == self.expiration
        self.events.append(("expire", self.model.now))


class PurgatoryModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.expiring = False
        self.timer = SystemTimer(clock=lambda: self.now, executor=self._expire)
        self.purgatory = DelayedOperationPurgatory("model", self.timer, purge_interval=3)
        self.ops: list[Op] = []
        self.lists: dict[str, list[Op]] = {}  # the model's watcher lists
        self.estimated = 0

    def _expire(self, op: Op) -> None:
        self.expiring = True
        try:
            op.run()
        finally:
            self.expiring = False

    # --- helpers -------------------------------------------------------------------------------
    def _unlink(self, key: str) -> None:
        live = [op for op in self.lists.get(key, []) if not op.is_completed]
        if live:
            self.lists[key] = live
        else:
            self.lists.pop(key, None)

    def _check(self, key: str) -> None:
        expected = [
            op for op in dict.fromkeys(self.lists.get(key, [])) if op.completable and not op.is_completed
        ]
        assert self.purgatory.check_and_complete(key) == len(expected)
        for op in expected:
            assert op.events == [("complete", self.now)], "a completable, checked operation was lost"
        self._unlink(key)

    # --- rules ---------------------------------------------------------------------------------
    @rule(
        keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3),
        delay=st.integers(1, 300),
        ready=st.booleans(),
    )
    def new_operation(self, keys, delay, ready):
        op = Op(len(self.ops), delay, self)
        op.completable = ready
        self.ops.append(op)
        done = self.purgatory.try_complete_else_watch(op, keys)
        assert done is ready
        if ready:
            assert op.events == [("complete", self.now)]
        else:
            for key in keys:
                self.lists.setdefault(key, []).append(op)
            self.estimated += 1
            op.armed = True

    @precondition(lambda self: self.ops)
    @rule(data=st.data())
    def external_event(self, data):
        data.draw(st.sampled_from(self.ops)).completable = True

    @rule(key=st.sampled_from(KEYS))
    def check_and_complete(self, key):
        self._check(key)

    @precondition(lambda self: self.ops)
    @rule(data=st.data())
    def direct_try_complete(self, data):
        op = data.draw(st.sampled_from(self.ops))
        was_done = op.is_completed
        result = op.try_complete()
        assert result is (op.completable and not was_done)

    @rule(key=st.sampled_from(KEYS))
    def cancel_for_key(self, key):
        expected = self.lists.pop(key, [])
        assert self.purgatory.cancel_for_key(key) == expected
        for op in expected:
            op.armed = False

    @rule()
    def purge_check(self):
        delayed = sum(1 for op in self.ops if op.armed and not op.is_completed)
        if self.estimated - delayed > 3:
            self.estimated = delayed
            for key in list(self.lists):
                self._unlink(key)
        self.purgatory.maybe_purge(self.now)
        assert self.purgatory.estimated_total == self.estimated

    @rule(step=st.integers(1, 50))
    def time_passes(self, step):
        """Time moves without reaching any armed expiration (the reaper's clock lags, as in Kafka)."""
        limit = min((op.expiration for op in self.ops if op.armed and not op.is_completed), default=None)
        target = self.now + step if limit is None else min(self.now + step, limit)
        self.now = target

    @rule(data=st.data())
    def advance_to_next_expiration(self, data):
        at = self.timer.next_expiration()
        if at is None:
            return
        self.now = max(self.now, at)
        due = [op for op in self.ops if op.armed and not op.is_completed and op.expiration == self.now]
        if due and data.draw(st.booleans(), label="event first in the same ms"):
            op = data.draw(st.sampled_from(due))
            op.completable = True
            self._check(
                data.draw(st.sampled_from(sorted(set(k for k, ops in self.lists.items() if op in ops))))
            )
        self.timer.advance_clock(self.now)
        for op in due:
            if op.completable and op.events == [("complete", self.now)]:
                continue
            assert op.events == [("complete", self.now), ("expire", self.now)], (op.id, op.events)

    # --- invariants ----------------------------------------------------------------------------
    @invariant()
    def exactly_once(self):
        for op in self.ops:
            completes = [e for e in op.events if e[0] == "complete"]
            assert len(completes) == (1 if op.is_completed else 0)
            expires = [e for e in op.events if e[0] == "expire"]
            assert len(expires) == (1 if op.expired else 0)
            if op.armed and not op.is_completed:
                assert op.expiration >= self.now, f"op {op.id} left armed past its expiration"

    @invariant()
    def figures_match_the_model(self):
        delayed = sum(1 for op in self.ops if op.armed and not op.is_completed)
        assert self.purgatory.num_delayed() == delayed
        assert self.purgatory.watched() == sum(len(ops) for ops in self.lists.values())
        assert self.timer.size == delayed


TestPurgatoryModel = PurgatoryModel.TestCase
TestPurgatoryModel.settings = settings(max_examples=200, stateful_step_count=50, deadline=None)
