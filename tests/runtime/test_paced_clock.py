"""PacedClock: watchable speed, exact deadlines, time still while tasks run, idle waiters first."""

from __future__ import annotations

import itertools
import math

import pytest
import trio
import trio.testing

from minibroker.runtime.paced import PacedClock
from minibroker.scenario import load_scenario, run_scenario
from minibroker.trace import ListSink
from tests.tui.helpers import CASCADE


class SteppingReal:
    """A fake real clock that moves 10 s every time it is read: idle waits look very long."""

    def __init__(self) -> None:
        self.reads = itertools.count()

    def __call__(self) -> float:
        return next(self.reads) * 10.0


async def _wake_times(deadlines: list[float]) -> list[tuple[float, float]]:
    seen = []

    async def sleeper(deadline: float) -> None:
        await trio.sleep_until(deadline)
        seen.append((deadline, trio.current_time()))
        sum(range(100_000))  # work: time must not move under it
        seen.append((deadline, trio.current_time()))

    async with trio.open_nursery() as nursery:
        for deadline in deadlines:
            nursery.start_soon(sleeper, deadline)
    return seen


@pytest.mark.parametrize("rate", [10.0, 1000.0, math.inf])
def test_tasks_wake_at_exactly_their_deadline_at_any_rate(rate):
    clock = PacedClock(rate, real_clock=SteppingReal())
    seen = trio.run(_wake_times, [0.35, 0.34, 0.45], clock=clock)
    assert seen == [(0.34, 0.34), (0.34, 0.34), (0.35, 0.35), (0.35, 0.35), (0.45, 0.45), (0.45, 0.45)]


def test_idle_time_moves_virtual_time_at_the_rate():
    reads = iter([0.0, 2.0])  # go idle at 0, wake at 2 s (real)

    async def main() -> float:
        await trio.lowlevel.checkpoint()
        return trio.current_time()

    clock = PacedClock(0.5, real_clock=lambda: next(reads, 2.0))
    clock.start_clock()
    clock.deadline_to_sleep_time(10.0)  # the run loop goes idle: 10 virtual s away = 20 real s
    assert clock.current_time() == 1.0  # woken after 2 real s at 0.5: 1 virtual s
    assert clock.deadline_to_sleep_time(10.0) == 18.0
    assert trio.run(main, clock=PacedClock(0.5)) == 0.0


def test_idle_waiters_are_woken_before_time_moves():
    async def main() -> list[float]:
        times = []

        async def later() -> None:
            await trio.sleep(5)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(later)
            await trio.testing.wait_all_tasks_blocked()
            times.append(trio.current_time())
            await trio.sleep(1)
            times.append(trio.current_time())
        times.append(trio.current_time())
        return times

    assert trio.run(main, clock=PacedClock(math.inf)) == [0.0, 1.0, 5.0]


def test_rate_and_advance_to():
    clock = PacedClock(2.0)
    clock.advance_to(3.5)
    clock.advance_to(1.0)  # never backwards
    assert clock.current_time() == 3.5
    clock.rate = 0
    assert clock.deadline_to_sleep_time(4.0) == math.inf
    assert clock.deadline_to_sleep_time(3.0) == 0.0  # already due
    with pytest.raises(ValueError):
        clock.rate = -1
    with pytest.raises(ValueError):
        PacedClock(float("nan"))


def test_a_scenario_on_the_paced_clock_is_the_virtual_run_event_for_event():
    from minibroker.runtime import deterministic_scheduling
    from minibroker.scenario import ScenarioRunner

    scenario = load_scenario(CASCADE)
    expected = ListSink()
    run_scenario(scenario, sinks=[expected])
    seen = ListSink()
    runner = ScenarioRunner(scenario, [seen], None)
    with deterministic_scheduling(scenario.seed):
        result = trio.run(runner.run, scenario.seed, clock=PacedClock(50.0))  # 450 ms in about 9 ms
    assert result.passed
    assert list(seen) == list(expected)
