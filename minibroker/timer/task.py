"""Timer tasks and the entries that place them in a timer.

A ``TimerTask`` is the unit of work: a fixed ``delay_ms`` counted from the moment
it is added to a timer, and a ``run()`` hook called once when it expires.

A task is bound to at most one *entry* at a time. Every ``add`` to a timer binds
the task to a new entry, removing the previous entry from wherever it sits, so
re-adding a task moves it rather than duplicating it. On a ``SystemTimer`` a task
is usually its own entry (Kafka's TimerTask likewise carries its place in the
wheel): it then holds its ``expiration_ms`` and ``bucket`` itself, sits in the
bucket's list and ``task.task is task``, so arming it allocates nothing. A task that
left a bucket's list only lazily (cancelled or re-armed while there) is marked
``STALE`` until that list is flushed or compacted; meanwhile it is armed through a
separate ``TimerTaskEntry``, so no list ever holds one task live twice. ``cancel()`` unbinds the
task and removes its entry in O(1); a cancelled task never runs, unless a
timer had already handed it to its executor (a flush hands over all its due
tasks before the first one runs, as Kafka submits them to its executor thread).

Invariants:
- ``task._entry`` is the one live entry of the task (the task itself or a
  ``TimerTaskEntry``), ``None`` (never armed, or handed to the executor) or
  ``CANCELLED`` (cancelled since it was last armed).
- ``task.bucket`` is the bucket holding the task as its own live entry, ``STALE``
  while a bucket's list still holds it as a removed item, else ``None``; a task
  sits as itself in at most one bucket list.
- an entry is *cancelled* exactly when its task is no longer bound to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class TimerTask:
    """A unit of delayed work. Subclass and override ``run``, or pass ``action``."""

    __slots__ = ("delay_ms", "_entry", "_action", "expiration_ms", "bucket")

    def __init__(self, delay_ms: int, action: Callable[[], Any] | None = None) -> None:
        self.delay_ms = delay_ms
        self._entry: Any = None
        self._action = action
        #: when the task is its own entry on a SystemTimer: its absolute expiration and its bucket
        self.expiration_ms = -1
        self.bucket: Any = None

    @property
    def task(self) -> TimerTask:
        """The task an entry stands for: a task that is its own entry stands for itself."""
        return self

    def run(self) -> Any:
        """Called once by the timer's executor when the task expires."""
        if self._action is not None:
            return self._action()
        return None

    def cancel(self) -> None:
        """Disarm the task: remove its entry from its timer in O(1) (amortised on the wheel). Never runs it.

        Cancelling twice is a no-op the second time.
        """
        entry = self._entry
        self._entry = CANCELLED
        if entry is not None:
            if entry is self:
                # remove() inlined (one frame fewer on the commonest cancel)
                bucket = self.bucket
                self.bucket = STALE
                removed = bucket.removed + 1
                bucket.removed = removed
                if removed > bucket.compact_after:
                    bucket.maybe_compact()
            elif type(entry) is BareEntry:
                # TimerTaskEntry.remove inlined for SystemTimer's own entries (one frame fewer); the
                # entry also lets go of the task at once (it may wait in its bucket's list for a long
                # timeout), so what the task holds is freed now, by reference counting
                entry.task = None
                bucket = entry.bucket
                if bucket is not None:
                    entry.bucket = None
                    removed = bucket.removed + 1
                    bucket.removed = removed
                    if removed > bucket.compact_after:
                        bucket.maybe_compact()
            else:
                entry.remove()

    @property
    def is_cancelled(self) -> bool:
        """True once ``cancel()`` was called and the task was not added again since."""
        return self._entry is CANCELLED

    def _bind(self, entry: Any) -> None:
        """Make ``entry`` the task's current entry, removing any previous one."""
        old = self._entry
        if old is not None and old is not entry:
            old.remove()
        self._entry = entry

    def remove(self) -> None:
        """As its own live entry (``_entry is self``): leave its bucket, as ``TimerTaskEntry.remove``
        does, lazily: the bucket's list keeps the task, counted as removed, and ``bucket`` is ``STALE``
        until that list is flushed or compacted. Nothing to do when the task sits in no bucket itself."""
        bucket = self.bucket
        if bucket is not None and bucket is not STALE:
            self.bucket = STALE
            removed = bucket.removed + 1
            bucket.removed = removed
            if removed > bucket.compact_after:
                bucket.maybe_compact()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(delay_ms={self.delay_ms})"


class _Cancelled:
    """What a cancelled task is bound to: an entry that is in no bucket."""

    __slots__ = ()
    bucket = None

    def remove(self) -> None:
        """Nothing to detach."""

    def __repr__(self) -> str:
        return "CANCELLED"


#: the binding of a cancelled task (one flag fewer to store on every add and cancel)
CANCELLED = _Cancelled()


class _Stale:
    """The ``bucket`` of a task that a bucket's list still holds as a removed item."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "STALE"


#: see ``TimerTask.bucket``
STALE = _Stale()


class TimerTaskEntry:
    """A task's place in a ``TimerTaskList``: the task, its absolute expiration and its bucket.

    Creating an entry binds the task to it (``TimerTask._bind`` inlined: moving the
    task if it was elsewhere).
    """

    __slots__ = ("task", "expiration_ms", "bucket")

    def __init__(self, task: TimerTask, expiration_ms: int) -> None:
        self.task = task
        self.expiration_ms = expiration_ms
        self.bucket: Any = None
        old = task._entry
        if old is not None:
            old.remove()
        task._entry = self

    def cancelled(self) -> bool:
        """True when the task has been cancelled or re-bound to another entry."""
        task = self.task
        return task is None or task._entry is not self

    def remove(self) -> None:
        """Detach from the current bucket, if any. O(1) amortised: the entry stays in the
        bucket's list, counted as removed, until the bucket is flushed or compacted.
        """
        bucket = self.bucket
        if bucket is not None:
            self.bucket = None
            removed = bucket.removed + 1
            bucket.removed = removed
            if removed > bucket.compact_after:
                bucket.maybe_compact()

    def __repr__(self) -> str:
        return f"TimerTaskEntry({self.task!r}, expiration_ms={self.expiration_ms})"


class BareEntry(TimerTaskEntry):
    """A ``TimerTaskEntry`` made without arguments, for ``SystemTimer.add`` to fill in.

    Its ``__init__`` is object's own, so creating one runs no Python frame; the
    caller sets ``task``, ``expiration_ms`` and ``bucket`` and binds the task.
    """

    __slots__ = ()
    __init__ = object.__init__  # type: ignore[assignment]
