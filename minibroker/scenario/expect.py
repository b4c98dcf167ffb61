"""Checking expectations: each gives an ``ExpectationResult`` saying what was expected and what was seen."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from minibroker.clients import ClientRequest
from minibroker.scenario.model import Count, Event, PartitionState, PurgatoryFigures, RequestOutcome
from minibroker.sim.snapshot import ClusterView


@attrs.frozen
class ExpectationResult:
    where: str  # "expect[3]"
    expected: str
    passed: bool
    seen: str


def _compare(checks: Iterable[tuple[str, Any, Any]]) -> tuple[str, bool, str]:
    """(name, expected, seen) triples, expected None = not asked."""
    asked = [(name, want, got) for name, want, got in checks if want is not None]
    expected = ", ".join(f"{name} {want}" for name, want, _ in asked)
    seen = ", ".join(f"{name} {got}" for name, _, got in asked)
    return expected, all(want == got for _, want, got in asked), seen


def check_partition(
    expectation: PartitionState, view: ClusterView, lso: int | None = None
) -> ExpectationResult:
    """``lso``: the leader's last stable offset (the caller reads it when the expectation asks)."""
    partition = view.partition(expectation.partition)
    replica = expectation.replica if expectation.replica is not None else partition.leader
    state = partition.replica(replica) if replica in [r.broker for r in partition.replicas] else None
    expected, passed, seen = _compare(
        [
            ("leader", expectation.leader, partition.leader),
            ("epoch", expectation.epoch, partition.leader_epoch),
            ("isr", list(expectation.isr) if expectation.isr is not None else None, list(partition.isr)),
            ("hw", expectation.hw, state.high_watermark if state else None),
            ("leo", expectation.leo, state.log_end_offset if state else None),
            ("log start", expectation.log_start, state.log_start_offset if state else None),
            ("lso", expectation.lso, lso),
            (
                "local log start",
                expectation.local_log_start,
                state.local_log_start_offset if state else None,
            ),
        ]
    )
    per_replica = (expectation.hw, expectation.leo, expectation.log_start, expectation.local_log_start)
    who = f" (broker {replica})" if any(v is not None for v in per_replica) else ""
    return ExpectationResult(
        expectation.where,
        f"{expectation.partition}{who} at {expectation.at} ms: {expected}",
        passed,
        seen,
    )


def check_purgatory(expectation: PurgatoryFigures, view: ClusterView) -> ExpectationResult:
    broker = view.broker(expectation.broker)
    figures = {p.name: p for p in broker.purgatories}
    purgatory = figures.get(expectation.purgatory)
    get = (lambda name: getattr(purgatory, name)) if purgatory is not None else (lambda name: "broker down")
    expected, passed, seen = _compare(
        [
            ("num_delayed", expectation.num_delayed, get("num_delayed")),
            ("watched", expectation.watched, get("watched")),
            ("watched_keys", expectation.watched_keys, get("watched_keys")),
            ("expirations", expectation.expirations, get("expirations")),
            ("purges", expectation.purges, get("purges")),
        ]
    )
    return ExpectationResult(
        expectation.where,
        f"broker {expectation.broker} {expectation.purgatory} purgatory at {expectation.at} ms: {expected}",
        passed,
        seen,
    )


def check_request(expectation: RequestOutcome, requests: list[ClientRequest]) -> ExpectationResult:
    errors: dict[str, str] = {}
    for request in requests:
        errors.update(request.errors)
    done = all(request.completed for request in requests) and requests
    completed_at = max((r.completed_ms for r in requests if r.completed_ms is not None), default=None)
    causes = sorted({r.cause for r in requests if r.cause is not None})
    cause = causes[0] if len(causes) == 1 else ("/".join(causes) or None)
    records = sum(sum(r.records.values()) for r in requests)
    checks: list[tuple[str, Any, Any]] = []
    if isinstance(expectation.error, str):
        distinct = sorted(set(errors.values()))
        checks.append(("error", expectation.error, distinct[0] if len(distinct) == 1 else ",".join(distinct)))
    elif isinstance(expectation.error, dict):
        checks.append(("errors", expectation.error, {k: errors.get(k) for k in expectation.error}))
    checks.append(("cause", expectation.cause, cause))
    checks.append(("completed at", expectation.completed_at, completed_at))
    checks.append(("records", expectation.records, records))
    lows = sorted({low for r in requests for low in r.low_watermarks.values()})
    checks.append(("low watermark", expectation.low_watermark, lows[0] if len(lows) == 1 else lows))
    offsets = sorted({offset for r in requests for offset in r.offsets.values()})
    checks.append(("offset", expectation.offset, offsets[0] if len(offsets) == 1 else offsets))
    expected, passed, seen = _compare(checks)
    if expectation.completed_within is not None:
        low, high = expectation.completed_within
        within = completed_at is not None and low <= completed_at <= high
        expected = ", ".join(filter(None, [expected, f"completed within [{low}, {high}]"]))
        seen = ", ".join(filter(None, [seen, f"completed at {completed_at}"]))
        passed = passed and within
    if not done:
        passed = False
        seen = "never completed" if not requests else f"not completed ({seen})"
    return ExpectationResult(
        expectation.where, f"request {expectation.request}: {expected or 'completes'}", passed, seen
    )


def matches(event: Mapping[str, Any], fields: Mapping[str, Any]) -> bool:
    for key, want in fields.items():
        got = event.get(key)
        if isinstance(got, list) and not isinstance(want, list):
            if want not in got:
                return False
        elif got != want:
            return False
    return True


def check_event(expectation: Event, events: list[dict[str, Any]]) -> ExpectationResult:
    found = [e for e in events if matches(e, expectation.fields)]
    shown = ", ".join(f"{k}={v}" for k, v in expectation.fields.items())
    if expectation.count is None:
        passed = bool(found)
        expected = f"an event {shown}"
    else:
        passed = len(found) == expectation.count
        expected = f"{expectation.count} events {shown}"
    times = sorted({e["time_ms"] for e in found})
    seen = f"{len(found)} at {times[:6]}{'...' if len(times) > 6 else ''} ms" if found else "none"
    return ExpectationResult(expectation.where, expected, passed, seen)


def count_value(
    expectation: Count,
    requests: list[ClientRequest],
    totals: Mapping[int, Mapping[str, Mapping[str, int]]],
    events: list[dict[str, Any]],
) -> int:
    filters = expectation.filters
    if expectation.count == "requests":
        return sum(
            1
            for r in requests
            if r.completed
            and filters.get("client", r.client) == r.client
            and filters.get("kind", r.kind) == r.kind
            and filters.get("cause", r.cause) == r.cause
            and ("error" not in filters or filters["error"] in r.errors.values())
            and filters.get("broker", r.broker) == r.broker
        )
    if expectation.count == "events":
        return sum(1 for e in events if matches(e, filters["event"]))
    value = 0
    for broker, purgatories in totals.items():
        if filters.get("broker", broker) != broker:
            continue
        for name, figures in purgatories.items():
            if filters.get("purgatory", name) == name:
                value += figures.get(expectation.count, 0)
    return value


def check_count(expectation: Count, value: int) -> ExpectationResult:
    bounds = [
        ("=", expectation.equals, value == expectation.equals),
        (">=", expectation.at_least, expectation.at_least is not None and value >= expectation.at_least),
        ("<=", expectation.at_most, expectation.at_most is not None and value <= expectation.at_most),
    ]
    asked = [(op, bound, ok) for op, bound, ok in bounds if bound is not None]
    filters = ", ".join(f"{k}={v}" for k, v in expectation.filters.items() if k != "event")
    if "event" in expectation.filters:
        filters = ", ".join(
            filter(
                None,
                [filters, "event " + ", ".join(f"{k}={v}" for k, v in expectation.filters["event"].items())],
            )
        )
    what = f"{expectation.count}{f' ({filters})' if filters else ''}"
    expected = f"{what} " + " and ".join(f"{op} {bound}" for op, bound, _ in asked)
    return ExpectationResult(expectation.where, expected, all(ok for _, _, ok in asked), str(value))
