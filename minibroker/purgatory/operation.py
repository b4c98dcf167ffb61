"""DelayedOperation: a timer task that can also complete early.

An operation waits for a condition (``try_complete``) for at most ``delay_ms``.
It ends exactly once, by one of two paths:

- early: ``try_complete`` finds the condition true and calls ``force_complete``;
- timeout: the timer runs it (``run``), which calls ``force_complete`` and then
  ``on_expiration`` (``on_complete`` always runs first). A traced purgatory emits
  ``op.complete`` (cause ``expiry``) from the first and ``op.expire`` after the second.

``force_complete`` is the single gate: the first caller marks the operation
completed, cancels its timer entry (so the purgatory's count of delayed operations drops at
once) and runs ``on_complete``; every later caller gets False.

Kafka serialises these paths with a per-operation lock. minibroker runs on one
thread, so the lock is a re-entrancy marker (``lock_held``) kept only so that
the ``safe_*`` variants read like Kafka's and tests can check what runs under it.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

from minibroker.timer import TimerTask

if TYPE_CHECKING:
    from minibroker.purgatory.purgatory import DelayedOperationPurgatory


class DelayedOperation(TimerTask, abc.ABC):
    """Subclass and implement ``try_complete``, ``on_complete`` and ``on_expiration``.

    Invariants: ``on_complete`` runs at most once, and exactly once if the operation
    completed; ``on_expiration`` runs only on the timeout path, after ``on_complete``.
    """

    __slots__ = ("_completed", "_lock_depth", "_purgatory", "_armed", "expired", "op_id", "cause")

    #: whether ``try_complete_else_watch`` checks again once the operation is watched. Kafka does, for
    #: a condition another thread may make true in between; an operation whose ``try_complete`` only
    #: reads broker state (which watching, on this one thread, cannot change) sets it False
    recheck_after_watch = True

    def __init__(self, delay_ms: int, op_id: str | None = None) -> None:
        super().__init__(delay_ms)
        self._completed = False
        self._lock_depth = 0
        self._purgatory: DelayedOperationPurgatory[Any] | None = None
        self._armed = False
        #: True when the operation ended on the timeout path
        self.expired = False
        #: a stable name for traces; the purgatory assigns ``<name>-<n>`` when None
        self.op_id = op_id
        #: why it completed: "condition", "expiry", or a subclass's reason (e.g. "leadership")
        self.cause: str | None = None

    # --- hooks -----------------------------------------------------------------------------
    @abc.abstractmethod
    def try_complete(self) -> bool:
        """Check the condition; if it holds, return ``self.force_complete()``, else False."""

    @abc.abstractmethod
    def on_complete(self) -> None:
        """Called exactly once, when the operation completes by either path."""

    @abc.abstractmethod
    def on_expiration(self) -> None:
        """Called on the timeout path only, after ``on_complete``."""

    # --- completion ------------------------------------------------------------------------
    @property
    def is_completed(self) -> bool:
        return self._completed

    @property
    def lock_held(self) -> bool:
        """True while a ``safe_*`` method or the timeout path runs for this operation."""
        return self._lock_depth > 0

    def force_complete(self) -> bool:
        """Complete now if nobody has: cancel the timer entry, run ``on_complete``; True only then."""
        if self._completed:
            return False
        self._completed = True
        if self.cause is None:
            self.cause = "condition"
        self.cancel()
        self.on_complete()
        purgatory = self._purgatory
        if purgatory is not None and purgatory.tracer.enabled:
            purgatory.trace_completion(self)
        return True

    def cancel(self) -> None:
        """Disarm the timer entry without completing (``cancel_for_key`` uses this too)."""
        TimerTask.cancel(self)
        if self._armed:
            self._armed = False
            purgatory = self._purgatory
            if purgatory is not None:
                purgatory._num_delayed -= 1

    def count_expired(self, keys: Any) -> None:
        """One more expiration for each of ``keys`` in the purgatory's ``expires_by_key``."""
        purgatory = self._purgatory
        if purgatory is not None:
            for key in keys:
                purgatory.expires_by_key[key] = purgatory.expires_by_key.get(key, 0) + 1

    def safe_try_complete(self) -> bool:
        """``try_complete`` under the operation's lock; False at once if already completed."""
        if self._completed:
            return False
        self._lock_depth += 1
        try:
            return self.try_complete()
        finally:
            self._lock_depth -= 1

    def safe_try_complete_or_else(self, action: Any) -> bool:
        """Under the lock: ``try_complete``; if False, run ``action`` and ``try_complete`` again."""
        self._lock_depth += 1
        try:
            if self.try_complete():
                return True
            action()
            return self.try_complete()
        finally:
            self._lock_depth -= 1

    def run(self) -> None:
        """The timeout path, run by the timer's executor: force_complete, then on_expiration."""
        self._lock_depth += 1
        try:
            if not self._completed:
                self.cause = "expiry"
                self.expired = True
                purgatory = self._purgatory
                if purgatory is not None:
                    purgatory.expirations += 1
                self.force_complete()
                self.on_expiration()
                if purgatory is not None and purgatory.tracer.enabled:
                    purgatory.trace_expiration(self)
        finally:
            self._lock_depth -= 1
