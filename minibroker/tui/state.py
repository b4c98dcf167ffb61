"""What one TUI frame shows, as plain data: ``Frame``, captured from a running scenario.

``EventLog`` is the trace sink the TUI adds to a run: it keeps the latest events
and counts completed operations by cause (Kafka exposes no such split; the
``op.complete`` events carry it). ``capture`` reads a ``ScenarioRunner`` (while
it runs, or its ``RunResult`` once it has ended) into a ``Frame``; rendering
(``render.py``) only ever sees frames, never the live cluster.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from typing import Any

import attrs

from minibroker.delayed_messages.view import DelaysView
from minibroker.scenario import RunResult, Scenario, ScenarioRunner
from minibroker.scenario import expect as checks
from minibroker.scenario.features.retry import RetryView
from minibroker.scenario.model import Event, Fetch, Produce, RequestOutcome
from minibroker.sim.share_view import SharePartitionView
from minibroker.sim.snapshot import ClusterView
from minibroker.tui.describe import describe_expectation

#: the wall-clock length a scenario is slowed (or sped) to by default, in seconds
TARGET_WALL_S = 20.0
#: the default speed stays within these bounds (multiples of real time)
MIN_SPEED, MAX_SPEED = 0.001, 1000.0
#: causes of ``op.complete``, in the order the purgatory table shows them
CAUSES = ("condition", "expiry", "leadership")


class EventLog:
    """A trace sink: the last ``keep`` events (oldest first) and completions per (broker, purgatory, cause).

    Invariant: ``total`` counts every event seen; ``latest`` holds the last ``keep`` of them.
    """

    def __init__(self, keep: int = 200) -> None:
        self.latest: deque[dict[str, Any]] = deque(maxlen=keep)
        self.total = 0
        self.completed: Counter[tuple[int, str, str]] = Counter()

    def __call__(self, event: dict[str, Any]) -> None:
        self.total += 1
        self.latest.append(event)
        if event["kind"] == "op.complete":
            self.completed[(event["broker"], event["purgatory"], event["cause"])] += 1


@attrs.frozen
class ExpectationLine:
    """One expectation as the panel shows it; ``passed`` is None while it is not yet decided."""

    where: str
    text: str
    passed: bool | None
    seen: str = ""


@attrs.frozen
class Tally:
    """How a frame's expectations stand: the one count its panel title and the quit line both show."""

    passed: int
    failed: int
    to_come: int

    @classmethod
    def of(cls, lines: tuple[ExpectationLine, ...]) -> Tally:
        passed = sum(1 for line in lines if line.passed)
        failed = sum(1 for line in lines if line.passed is False)
        return cls(passed, failed, len(lines) - passed - failed)

    def parts(self) -> tuple[str, str, str]:
        return f"{self.passed} passed", f"{self.failed} failed", f"{self.to_come} to come"


@attrs.frozen
class Status:
    """How the run is going: ``mode`` is running, paused, finished or snapshot; ``speed`` in × real time.

    ``achieved`` is the speed the run actually kept lately when it fell behind ``speed``
    (its tasks needed more real time than that speed leaves them), else None.
    """

    mode: str
    speed: float | None = None
    keys: bool = False
    note: str = ""
    achieved: float | None = None


@attrs.frozen
class Frame:
    """Everything one frame shows, at virtual time ``time_ms``."""

    scenario: str
    description: str
    time_ms: int
    span_ms: int
    view: ClusterView
    broker: int
    events: tuple[dict[str, Any], ...]
    events_total: int
    completed: dict[tuple[int, str, str], int]
    expectations: tuple[ExpectationLine, ...]
    status: Status
    #: delayed messages (minibroker.delayed_messages), when the scenario has them
    delayed_messages: DelaysView | None = None
    #: the retrying consumer (minibroker.retry), when the scenario has a [retry] section
    retries: RetryView | None = None
    #: the share partitions' windows (KIP-932), when there are any
    share_partitions: tuple[SharePartitionView, ...] | None = None


def estimate_span_ms(scenario: Scenario) -> int:
    """How long the scenario runs in virtual ms, as far as the file tells (at least 100).

    ``end_ms`` if set; else the last step (with its duration), timed expectation or expected
    completion time.
    """
    if scenario.end_ms is not None:
        return max(100, scenario.end_ms)
    ends = [scenario.last_step_ms]
    for expectation in scenario.expectations:
        if isinstance(expectation, RequestOutcome):
            if expectation.completed_at is not None:
                ends.append(expectation.completed_at)
            if expectation.completed_within is not None:
                ends.append(expectation.completed_within[1])
    return max(100, *ends)


def default_speed(scenario: Scenario) -> float:
    """The speed that plays the scenario's span in about ``TARGET_WALL_S`` seconds, rounded to 3 digits."""
    speed = estimate_span_ms(scenario) / 1000 / TARGET_WALL_S
    speed = min(MAX_SPEED, max(MIN_SPEED, speed))
    digits = 2 - math.floor(math.log10(speed))
    return round(speed, digits)


def _live_lines(runner: ScenarioRunner) -> list[ExpectationLine]:
    """Expectations as far as they are decided while the run goes on."""
    single = {s.id for s in runner.scenario.steps if isinstance(s, (Produce, Fetch)) and s.id}
    lines = []
    for expectation in runner.scenario.expectations:
        result = runner.results.get(expectation.index)
        if result is None and isinstance(expectation, RequestOutcome) and expectation.request in single:
            requests = runner.named.get(expectation.request, [])
            if requests and all(r.completed for r in requests):
                result = checks.check_request(expectation, requests)
        if result is None and isinstance(expectation, Event) and expectation.count is None:
            found = checks.check_event(expectation, runner.kept)
            if found.passed:
                result = found
        if result is None:
            lines.append(ExpectationLine(expectation.where, describe_expectation(expectation), None))
        else:
            lines.append(ExpectationLine(result.where, result.expected, result.passed, result.seen))
    return lines


def capture(
    source: ScenarioRunner | RunResult,
    log: EventLog,
    broker: int,
    status: Status,
    time_ms: int | None = None,
    keep_events: int = 60,
) -> Frame:
    """A frame of a running scenario (its live cluster) or of a finished run (its final state).

    ``time_ms`` labels the frame when it stands for a later ms in which nothing happened.
    """
    delayed_messages = retries = share_partitions = None
    if isinstance(source, RunResult):
        view = source.final
        lines = [ExpectationLine(r.where, r.expected, r.passed, r.seen) for r in source.results]
    else:
        assert source.cluster is not None, "capture() before the runner is ready"
        view = source.cluster.snapshot()
        lines = _live_lines(source)
        views = source.views()
        delayed_messages, retries = views.get("delayed_messages"), views.get("retry")
        share_partitions = views.get("share")
    scenario = source.scenario
    return Frame(
        scenario.name,
        scenario.description,
        view.time_ms if time_ms is None else time_ms,
        estimate_span_ms(scenario),
        view,
        broker % max(1, len(view.brokers)),
        tuple(log.latest)[-keep_events:],
        log.total,
        dict(log.completed),
        tuple(lines),
        status,
        delayed_messages,
        retries,
        share_partitions,
    )
