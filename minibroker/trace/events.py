"""Trace events: one flat record per thing that happened, emitted through a ``Tracer``.

Every layer emits with ``tracer.emit(kind, **fields)``; the tracer stamps the
virtual time (``time_ms``) and a sequence number (``seq``, the total order of
the run). Field names are shared by all kinds so a trace is one table:
``broker``, ``purgatory``, ``op``, ``keys``, ``partition``, ``offset``, ``error``,
``cause`` and a few kind-specific ones. Values are plain ints, strings, lists of
strings or None, so any sink can write them.

Emitting is cheap when nobody listens: check ``tracer.enabled`` before building
expensive fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

Event = dict[str, Any]


class Tracer(Protocol):
    enabled: bool

    def emit(self, kind: str, **fields: Any) -> None: ...


class NullTracer:
    """Discards everything."""

    enabled = False

    def emit(self, kind: str, **fields: Any) -> None:
        return None


NULL_TRACER = NullTracer()


class RecordingTracer:
    """Stamps each event with ``seq`` and ``time_ms`` and hands it to every sink.

    ``clock`` returns the current time in ms (e.g. ``MsClock.now_ms``).
    """

    enabled = True

    def __init__(
        self, clock: Callable[[], int], sinks: list[Callable[[Event], object]] | None = None
    ) -> None:
        self.clock = clock
        self.sinks: list[Callable[[Event], object]] = list(sinks or [])
        self.seq = 0

    def emit(self, kind: str, **fields: Any) -> None:
        event: Event = {"seq": self.seq, "time_ms": self.clock(), "kind": kind}
        event.update(fields)
        self.seq += 1
        for sink in self.sinks:
            sink(event)


class ListSink(list):
    """A sink that keeps every event in memory (for tests and the TUI)."""

    def __call__(self, event: Event) -> None:
        self.append(event)

    def of_kind(self, *kinds: str) -> list[Event]:
        return [event for event in self if event["kind"] in kinds]
