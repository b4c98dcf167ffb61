"""Shrinking a failing schedule by delta debugging, deterministically.

Why delta debugging and not Hypothesis's shrinker: a schedule is a few lists
(faults, produce requests, polls, clients, topics) plus a few numbers, a run is
deterministic, and the question "does it still fail?" costs one run. ddmin over
each list (remove halves, then quarters, ... keep any removal that still fails)
needs no generator to replay, is the same on every machine, and its budget is a
plain count of runs.

A candidate *still fails* when a run of it has a violation of the same invariant
on the same partition as the original (any partition, for violations that name
none). Passes, repeated until a round changes nothing or the budget runs out:
faults; consumers (with their polls); group members (with their faults); polls; producers (with their produce
requests); produce requests; topics; one record per request; each fault halved;
and finally the heal time moved to just after the last fault or request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import attrs

from minibroker.chaos.run import RunOutcome, run_schedule
from minibroker.chaos.schedule import Schedule
from minibroker.chaos.violations import Violation

T = TypeVar("T")


@attrs.define
class Shrunk:
    schedule: Schedule
    outcome: RunOutcome
    violation: Violation  # the matching violation of the shrunk run
    runs: int  # candidate runs spent


def same_failure(target: Violation) -> Callable[[RunOutcome], Violation | None]:
    def match(outcome: RunOutcome) -> Violation | None:
        for violation in outcome.violations + outcome.expected:
            if violation.invariant == target.invariant and (
                target.partition is None or violation.partition == target.partition
            ):
                return violation
        return None

    return match


class _Search:
    def __init__(self, test: Callable[[Schedule], RunOutcome | None], budget: int) -> None:
        self.test = test
        self.budget = budget
        self.runs = 0

    def ok(self, candidate: Schedule) -> RunOutcome | None:
        if self.runs >= self.budget:
            return None
        self.runs += 1
        return self.test(candidate)

    def ddmin(self, items: Sequence[T], rebuild: Callable[[list[T]], Schedule], least: int = 0) -> list[T]:
        """The smallest sublist (by ddmin's complement steps, at least ``least`` long) that still fails."""
        current = list(items)
        chunks = 2
        while current and self.runs < self.budget:
            size = max(1, len(current) // chunks)
            removed_any = False
            for start in range(0, len(current), size):
                candidate = current[:start] + current[start + size :]
                if len(candidate) < least:
                    continue
                if self.ok(rebuild(candidate)) is not None:
                    current = candidate
                    chunks = max(chunks - 1, 2)
                    removed_any = True
                    break
            if not removed_any:
                if size == 1:
                    break
                chunks = min(chunks * 2, len(current))
        return current


def _drop_topic(schedule: Schedule, keep: list) -> Schedule:
    names = {t.name for t in keep}
    consumers = []
    for consumer in schedule.consumers:
        assign = tuple(a for a in consumer.assign if a[0] in names)
        if assign:
            consumers.append(attrs.evolve(consumer, assign=assign))
    ids = {c.id for c in consumers}
    return attrs.evolve(
        schedule,
        topics=tuple(keep),
        consumers=tuple(consumers),
        polls=tuple(p for p in schedule.polls if p.consumer in ids),
        produces=tuple(p for p in schedule.produces if p.topic in names),
    )


def _last_event(schedule: Schedule) -> int:
    ends = [f.end for f in schedule.faults] + [p.at for p in schedule.produces]
    ends += [p.at + p.duration_ms for p in schedule.polls]
    return max(ends, default=0) + 1


def shrink(schedule: Schedule, target: Violation, plant: str | None = None, budget: int = 200) -> Shrunk:
    """The smallest schedule found that still fails like ``target`` (within ``budget`` runs)."""
    match = same_failure(target)

    def test(candidate: Schedule) -> RunOutcome | None:
        outcome = run_schedule(candidate, plant)
        return outcome if match(outcome) is not None else None

    search = _Search(test, budget)
    current = schedule
    for _ in range(3):
        before = current
        s = current
        s = attrs.evolve(
            s, faults=tuple(search.ddmin(s.faults, lambda k, s=s: attrs.evolve(s, faults=tuple(k))))
        )
        s = attrs.evolve(s, **_consumers(search, s))
        s = _members(search, s)
        s = attrs.evolve(
            s, polls=tuple(search.ddmin(s.polls, lambda k, s=s: attrs.evolve(s, polls=tuple(k))))
        )
        s = attrs.evolve(s, txns=tuple(search.ddmin(s.txns, lambda k, s=s: attrs.evolve(s, txns=tuple(k)))))
        if s.transform is not None and search.ok(attrs.evolve(s, transform=None)) is not None:
            s = attrs.evolve(s, transform=None)
        s = attrs.evolve(s, **_producers(search, s))
        s = attrs.evolve(
            s, produces=tuple(search.ddmin(s.produces, lambda k, s=s: attrs.evolve(s, produces=tuple(k))))
        )
        if len(s.topics) > 1:
            s = _drop_topic(s, search.ddmin(s.topics, lambda k, s=s: _drop_topic(s, k), 1))
        s = _each(search, s, "produces", lambda p: attrs.evolve(p, records=1) if p.records > 1 else None)
        s = _each(
            search,
            s,
            "faults",
            lambda f: (
                attrs.evolve(f, end=f.start + (f.end - f.start) // 2) if f.end - f.start >= 20 else None
            ),
        )
        earlier = min(s.heal_ms, _last_event(s))
        if earlier < s.heal_ms and search.ok(attrs.evolve(s, heal_ms=earlier)) is not None:
            s = attrs.evolve(s, heal_ms=earlier)
        current = s
        if current == before:
            break
    outcome = run_schedule(current, plant)
    violation = match(outcome)
    if violation is None:  # the budget ran out mid-way: fall back to the original
        current, outcome = schedule, run_schedule(schedule, plant)
        violation = match(outcome) or target
    return Shrunk(current, outcome, violation, search.runs)


def _consumers(search: _Search, s: Schedule) -> dict:
    def rebuild(keep: list) -> Schedule:
        ids = {c.id for c in keep}
        return attrs.evolve(s, consumers=tuple(keep), polls=tuple(p for p in s.polls if p.consumer in ids))

    kept = search.ddmin(s.consumers, rebuild)
    ids = {c.id for c in kept}
    return {"consumers": tuple(kept), "polls": tuple(p for p in s.polls if p.consumer in ids)}


def _members(search: _Search, s: Schedule) -> Schedule:
    """Fewer group members (each with its faults)."""

    def rebuild(keep: list) -> Schedule:
        gone = {m.id for m in s.members} - {m.id for m in keep}
        faults = tuple(f for f in s.faults if f.member not in gone and not gone.intersection(f.between or ()))
        return attrs.evolve(s, members=tuple(keep), faults=faults)

    return rebuild(search.ddmin(s.members, rebuild))


def _producers(search: _Search, s: Schedule) -> dict:
    used = [c for c in s.producers if any(p.producer == c.id for p in s.produces)]
    transactional = tuple(c for c in s.producers if any(t.client == c.id for t in s.txns))
    if not used:
        first = [c for c in s.producers[:1] if c not in transactional]
        return {"producers": (*first, *transactional)}

    def rebuild(keep: list) -> Schedule:
        ids = {c.id for c in keep}
        return attrs.evolve(
            s, producers=tuple(keep), produces=tuple(p for p in s.produces if p.producer in ids)
        )

    kept = [*search.ddmin(used, lambda keep: rebuild([*keep, *transactional]), 1), *transactional]
    ids = {c.id for c in kept}
    return {"producers": tuple(kept), "produces": tuple(p for p in s.produces if p.producer in ids)}


def _each(search: _Search, s: Schedule, field: str, smaller: Callable) -> Schedule:
    """Try making each item of ``field`` smaller, one at a time; keep what still fails."""
    items = list(getattr(s, field))
    for i, item in enumerate(items):
        replacement = smaller(item)
        if replacement is None:
            continue
        candidate = attrs.evolve(s, **{field: tuple([*items[:i], replacement, *items[i + 1 :]])})
        if search.ok(candidate) is not None:
            items[i] = replacement
            s = candidate
    return s
