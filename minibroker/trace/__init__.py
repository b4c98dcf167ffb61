"""Event records and sinks; every layer emits through the small ``Tracer`` protocol."""

from minibroker.trace.events import NULL_TRACER, Event, ListSink, NullTracer, RecordingTracer, Tracer
from minibroker.trace.sinks import COLUMNS, JsonlSink, ParquetSink, normalize, open_sink

__all__ = [
    "COLUMNS",
    "NULL_TRACER",
    "Event",
    "JsonlSink",
    "ListSink",
    "NullTracer",
    "ParquetSink",
    "RecordingTracer",
    "Tracer",
    "normalize",
    "open_sink",
]
