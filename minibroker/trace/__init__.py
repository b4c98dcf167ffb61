"""Event records and sinks; every layer emits through the small ``Tracer`` protocol."""

from minibroker.trace.events import NULL_TRACER, Event, ListSink, NullTracer, RecordingTracer, Tracer

__all__ = ["NULL_TRACER", "Event", "ListSink", "NullTracer", "RecordingTracer", "Tracer"]
