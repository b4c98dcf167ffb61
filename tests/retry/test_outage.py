"""The outage tracker of the retry service: its backoff, its two lines per outage, its limit (pure, on a
fake clock)."""

from __future__ import annotations

import pytest

from minibroker.retry.outage import Outage, OutageLimitExceeded, reason_of


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def _outage(limit_ms: int = 0) -> tuple[Outage, Clock, list[str]]:
    clock, lines = Clock(), []
    return Outage("redis at redis://h:1/0", 100, 1_000, limit_ms, lines.append, clock), clock, lines


def test_backoff_doubles_up_to_the_max_with_one_line_each_way():
    outage, clock, lines = _outage()
    waits = []
    for _ in range(7):
        waits.append(outage.failed("ConnectionError: refused"))
        clock.now += waits[-1]
    assert waits == [100, 200, 400, 800, 1_000, 1_000, 1_000]
    assert lines == ["redis at redis://h:1/0 unreachable: ConnectionError: refused; retrying in 100 ms"]
    outage.succeeded()
    outage.succeeded()  # no outage: no line
    assert lines[1:] == ["redis at redis://h:1/0 reachable again after 4500 ms (7 failed attempts)"]
    assert not outage.active and outage.count == 1
    assert outage.failed("again") == 100 and outage.count == 2  # a new outage starts from the bottom


def test_the_limit_clips_the_last_wait_then_gives_up():
    outage, clock, lines = _outage(limit_ms=1_000)
    waits = []
    with pytest.raises(OutageLimitExceeded) as raised:
        while True:
            waits.append(outage.failed("ConnectionError: refused"))
            clock.now += waits[-1]
    assert waits == [100, 200, 400, 300]  # the last one ends exactly at the limit
    assert str(raised.value) == (
        "redis at redis://h:1/0 unreachable for 1000 ms (outage_limit_ms = 1000): giving up; "
        "last error: ConnectionError: refused"
    )
    assert len(lines) == 1


def test_reasons_are_one_short_line():
    assert reason_of(ConnectionError("Error 111 connecting to h:1. Connection refused.")) == (
        "ConnectionError: Error 111 connecting to h:1. Connection refused"
    )
    assert reason_of(TimeoutError()) == "TimeoutError"
    assert reason_of(ValueError("ValueError: x\nsecond line")) == "ValueError: x"
    assert reason_of(KeyError(None)) == "KeyError"
    # kafka-python's errors name themselves after an error code
    assert reason_of(RuntimeError("[Error 87] RuntimeError: None")) == "RuntimeError"
    assert reason_of(RuntimeError("[Error 30] RuntimeError: retry-test")) == "RuntimeError: retry-test"
    long = reason_of(RuntimeError("y" * 500))
    assert len(long) == len("RuntimeError: ") + 160 and long.endswith("...")
