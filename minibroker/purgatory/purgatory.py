"""DelayedOperationPurgatory: operations parked until a key's event or their timeout.

An operation is *watched* on one or more keys (for produce and fetch, the
partitions it touches) and *armed* in a timer. An event on a key
(``check_and_complete``) re-checks every operation watched on that key; the
timer expires the rest.

- ``try_complete_else_watch(op, keys)``: check once; if not done, append the
  operation to every key's watcher list (skipping the remaining keys if it
  completes meanwhile), count it once in the estimated total, check again (an
  event between the two checks would otherwise be lost), and only if still not
  done arm it in the timer.
- ``check_and_complete(key)``: walk the key's watchers in order; unlink the ones
  already completed elsewhere and the ones this call completes; drop the key when
  its list is empty. Returns how many *this call* completed.
- ``cancel_for_key(key)``: forget the key and disarm its operations without
  completing them (no callback runs). The estimated total is not adjusted.
- ``maybe_purge()``: called after each reaper advance. When
  ``estimated_total - num_delayed > purge_interval`` (strictly), reset the
  estimate to ``num_delayed`` and unlink every completed operation from every
  watcher list.

Figures, as Kafka exposes them: ``watched()`` is PurgatorySize, the total length
of all watcher lists, completed-but-not-yet-unlinked operations included, an
operation counting once per key; ``num_delayed()`` is NumDelayedOperations;
``expirations`` is ExpiresPerSec as a running total.

Deviations from Kafka, by design:
- One SystemTimer per broker is shared by that broker's purgatories (Kafka gives
  each purgatory its own). So ``num_delayed`` cannot be ``timer.size``: each
  purgatory counts the operations it armed that have not yet left the timer by
  completing, being cancelled or starting their timeout path.
- One dict of watcher lists instead of 512 lock-sharded ones: shards exist to
  spread lock contention, which a single-threaded emulator does not have; every
  figure above is unchanged.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

from minibroker.purgatory.operation import DelayedOperation
from minibroker.timer import Timer
from minibroker.trace import NULL_TRACER, Tracer

Op = TypeVar("Op", bound=DelayedOperation)

#: Kafka's default purge interval (DelayedOperationPurgatory, *.purgatory.purge.interval.requests)
DEFAULT_PURGE_INTERVAL = 1000


class DelayedOperationPurgatory(Generic[Op]):
    """Watchers per key plus a timer; see the module docstring for the rules."""

    def __init__(
        self,
        name: str,
        timer: Timer,
        *,
        broker_id: int = 0,
        purge_interval: int = DEFAULT_PURGE_INTERVAL,
        timer_enabled: bool = True,
        tracer: Tracer = NULL_TRACER,
    ) -> None:
        self.name = name
        self.tracer = tracer
        self.timer = timer
        self.broker_id = broker_id
        self.purge_interval = purge_interval
        self.timer_enabled = timer_enabled
        self._watchers: dict[Hashable, list[Op]] = {}
        self._num_delayed = 0
        #: Kafka's estimatedTotalOperations
        self.estimated_total = 0
        #: operations that ended on the timeout path (ExpiresPerSec as a total)
        self.expirations = 0
        #: expirations per key, for operations that count them per key (DelayedProduce)
        self.expires_by_key: dict[Hashable, int] = {}
        #: operations completed by try_complete_else_watch or check_and_complete
        self.completions = 0
        #: purges run, operations they unlinked in all, and (time, unlinked) of the last one
        self.purges = 0
        self.purged = 0
        self.last_purge: tuple[int, int] | None = None
        self._next_id = 0

    # --- the three entry points ------------------------------------------------------------
    def try_complete_else_watch(self, operation: Op, keys: Iterable[Hashable]) -> bool:
        """Complete ``operation`` now if it can; otherwise watch it on ``keys`` and arm it.

        True only if this call completed it. An empty key list is an error.
        (``DelayedOperation.safe_try_complete_or_else`` inlined: check, watch, check again, the last
        step only for an operation with ``recheck_after_watch``.)
        """
        if not isinstance(keys, (list, tuple)):
            keys = list(keys)
        if not keys:
            raise ValueError(f"purgatory {self.name}: the watch key list can't be empty")
        operation._purgatory = self
        tracer = self.tracer
        if tracer.enabled:
            if operation.op_id is None:
                operation.op_id = f"{self.name}-{self._next_id}"
            tracer.emit(
                "op.create",
                broker=self.broker_id,
                purgatory=self.name,
                op=operation.op_id,
                keys=[str(key) for key in keys],
                delay_ms=operation.delay_ms,
            )
        self._next_id += 1
        operation._lock_depth += 1
        try:
            if operation.try_complete():
                self.completions += 1
                return True
            watchers = self._watchers
            for key in keys:
                if operation._completed:
                    break
                watching = watchers.get(key)
                if watching is None:
                    watchers[key] = [operation]
                else:
                    watching.append(operation)
            self.estimated_total += 1
            if operation.recheck_after_watch and operation.try_complete():
                self.completions += 1
                return True
        finally:
            operation._lock_depth -= 1
        if tracer.enabled:
            tracer.emit("op.watch", broker=self.broker_id, purgatory=self.name, op=operation.op_id)
        if not operation._completed and self.timer_enabled:
            operation._armed = True
            self._num_delayed += 1
            self.timer.add(operation)
            if operation._completed:
                operation.cancel()
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Re-check the operations watched on ``key``; return how many this call completed."""
        watchers = self._watchers.get(key)
        if watchers is None:
            return 0
        completed = 0
        tracer = self.tracer
        for operation in list(watchers):
            if not operation.is_completed:
                done = operation.safe_try_complete()
                completed += done
                if tracer.enabled and not done:
                    tracer.emit(
                        "op.check",
                        broker=self.broker_id,
                        purgatory=self.name,
                        op=operation.op_id,
                        keys=[str(key)],
                        result=False,
                    )
        self._unlink_completed(key)
        self.completions += completed
        return completed

    def cancel_for_key(self, key: Hashable) -> list[Op]:
        """Stop watching ``key``: disarm its operations without completing them; return them."""
        watchers = self._watchers.pop(key, None)
        if watchers is None:
            return []
        for operation in watchers:
            operation.cancel()
        if self.tracer.enabled:
            self.tracer.emit(
                "op.cancel",
                broker=self.broker_id,
                purgatory=self.name,
                keys=[str(key)],
                count=len(watchers),
                ops=[operation.op_id for operation in watchers],
            )
        return watchers

    # --- purge -----------------------------------------------------------------------------
    def maybe_purge(self, now_ms: int | None = None) -> int:
        """Kafka's purge check, run after each reaper advance; return how many were unlinked."""
        num_delayed = self._num_delayed
        if self.estimated_total - num_delayed <= self.purge_interval:
            return 0
        self.estimated_total = num_delayed
        unlinked = 0
        for key in list(self._watchers):
            unlinked += self._unlink_completed(key)
        self.purges += 1
        self.purged += unlinked
        self.last_purge = (self.timer.now() if now_ms is None else now_ms, unlinked)
        if self.tracer.enabled:
            self.tracer.emit(
                "purge",
                broker=self.broker_id,
                purgatory=self.name,
                count=unlinked,
                watched=self.watched(),
                num_delayed=num_delayed,
            )
        return unlinked

    def trace_completion(self, operation: Op) -> None:
        """Emit the completion of ``operation`` (called by ``force_complete`` when tracing)."""
        self.tracer.emit(
            "op.complete",
            broker=self.broker_id,
            purgatory=self.name,
            op=operation.op_id,
            cause=operation.cause,
        )

    def trace_expiration(self, operation: Op) -> None:
        """Emit ``op.expire``: ``on_expiration`` of ``operation`` has run (the timeout path's end)."""
        self.tracer.emit("op.expire", broker=self.broker_id, purgatory=self.name, op=operation.op_id)

    def _unlink_completed(self, key: Hashable) -> int:
        """Drop completed operations from ``key``'s list (and the key if none is left); how many went."""
        watchers = self._watchers.get(key)
        if watchers is None:
            return 0
        live = [operation for operation in watchers if not operation._completed]
        if live:
            if len(live) != len(watchers):
                self._watchers[key] = live
        else:
            del self._watchers[key]
        return len(watchers) - len(live)

    # --- figures ---------------------------------------------------------------------------
    def watched(self) -> int:
        """PurgatorySize: all watcher list lengths, completed-but-not-unlinked included."""
        return sum(len(watchers) for watchers in self._watchers.values())

    def num_delayed(self) -> int:
        """NumDelayedOperations: operations of this purgatory still armed in the timer."""
        return self._num_delayed

    def watched_keys(self) -> list[Hashable]:
        """The keys that currently have a watcher list, in first-watched order."""
        return list(self._watchers)

    def watchers(self, key: Hashable) -> list[Op]:
        """A copy of the watcher list of ``key`` (empty if the key is not watched)."""
        return list(self._watchers.get(key, ()))

    def __repr__(self) -> str:
        return (
            f"DelayedOperationPurgatory({self.name!r}, watched={self.watched()}, "
            f"num_delayed={self._num_delayed})"
        )
