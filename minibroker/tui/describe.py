"""One-line descriptions for the TUI: trace events and expectations not yet checked.

Pure functions of plain data (a trace event dict, a scenario expectation); the
texts are what the event log and the expectations panel show.
"""

from __future__ import annotations

from typing import Any

from minibroker.scenario.model import (
    Count,
    DelayHeld,
    Delivered,
    Event,
    Expectation,
    GroupState,
    MemberErrors,
    PartitionState,
    PurgatoryFigures,
    RequestOutcome,
    RetryCounts,
    SharePartitionState,
    TransactionState,
    WheelFigures,
)

#: fields every event has or that the log shows in its own columns
_SHOWN_APART = {"seq", "time_ms", "kind", "broker"}
#: the order of the common fields in a generic description
_COMMON = ("op", "purgatory", "partition", "keys", "offset", "count", "error", "cause")


def _value(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


def _generic(event: dict[str, Any]) -> str:
    parts = [f"{name}={_value(event[name])}" for name in _COMMON if event.get(name) is not None]
    parts += [
        f"{name}={_value(value)}"
        for name, value in sorted(event.items())
        if name not in _SHOWN_APART and name not in _COMMON and value is not None
    ]
    return " ".join(parts)


def describe_event(event: dict[str, Any]) -> str:
    """What happened, in a few words (the time, broker and kind are shown apart)."""
    kind = event["kind"]
    op = event.get("op")
    if kind in ("timer.add", "timer.reinsert"):
        move = f"from bucket {event['from_bucket']} " if kind == "timer.reinsert" else ""
        return (
            f"{op} {move}→ L{event['level']} slot {event['slot']} "
            f"(bucket {event['bucket']}, expires {event['expiration']}, {event['left_ms']} ms left)"
        )
    if kind == "timer.fire":
        return f"{op} fired (expiration {event['expiration']})"
    if kind == "op.create":
        return f"{op} enters {event['purgatory']} purgatory, keys {_value(event.get('keys') or [])}, " + (
            f"timeout {event['delay_ms']} ms"
        )
    if kind == "op.complete":
        return f"{op} {event['purgatory']} completed by {event['cause']}"
    if kind == "purge":
        return (
            f"{event['purgatory']} purge unlinked {event['count']} "
            f"(watched {event.get('watched')}, delayed {event.get('num_delayed')})"
        )
    if kind in ("timer.schedule", "timer.cancel", "timer.expire"):
        verb = {
            "timer.schedule": "armed for",
            "timer.cancel": "cancelled, was due",
            "timer.expire": "fired, due",
        }
        return f"{event['key']} {verb[kind]} {event['deadline_ms']}"
    if kind == "hw":
        return f"{event['partition']} HW {event['previous']} → {event['hw']} (LEO {event['leo']})"
    return _generic(event)


def describe_expectation(expectation: Expectation) -> str:
    """What an expectation asks, before it is checked."""
    if isinstance(expectation, RequestOutcome):
        return f"request {expectation.request}"
    if isinstance(expectation, PartitionState):
        return f"{expectation.partition} at {expectation.at} ms"
    if isinstance(expectation, PurgatoryFigures):
        return f"broker {expectation.broker} {expectation.purgatory} purgatory at {expectation.at} ms"
    if isinstance(expectation, Count):
        return f"count of {expectation.count} (at the end)"
    if isinstance(expectation, Delivered):
        return f"{expectation.request} delivered"
    if isinstance(expectation, DelayHeld):
        return f"{expectation.partition} held at {expectation.at} ms"
    if isinstance(expectation, WheelFigures):
        return f"wheel of broker {expectation.broker} at {expectation.at} ms"
    if isinstance(expectation, GroupState):
        return f"group {expectation.group} at {expectation.at} ms"
    if isinstance(expectation, MemberErrors):
        return f"member {expectation.member}'s errors (at the end)"
    if isinstance(expectation, RetryCounts):
        return f"retries of {expectation.topic} at {expectation.at} ms"
    if isinstance(expectation, SharePartitionState):
        return f"share partition {expectation.group}/{expectation.partition} at {expectation.at} ms"
    if isinstance(expectation, TransactionState):
        return f"transaction {expectation.transaction} at {expectation.at} ms"
    assert isinstance(expectation, Event), type(expectation).__name__
    fields = ", ".join(f"{k}={v}" for k, v in expectation.fields.items())
    return f"an event {fields}" if expectation.count is None else f"{expectation.count} events {fields}"
