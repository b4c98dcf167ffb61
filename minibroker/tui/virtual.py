"""Frames of a scenario run in virtual time, taken without disturbing the run.

``play`` runs a scenario instantly (``MockClock(autojump_threshold=0)``, seeded
scheduling, exactly like ``minibroker run``) and calls ``on_time(runner, ms)`` at
the *end* of each requested millisecond: when no task can run, none waits in
``wait_all_tasks_blocked`` (the runner's own end-of-ms checks have run) and the
clock is about to jump past that millisecond. The call is made from a trio
``Instrument`` hook rather than a task, so no task is woken for it and the run's
order of events is the one ``minibroker run`` produces for the same seed.

Used by ``minibroker snapshot`` (one time, then the run stops) and by ``run --tui``
when stdout is not a terminal (a plain frame every N ms until the run ends).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence

import trio
import trio.testing

from minibroker.runtime import deterministic_scheduling
from minibroker.runtime.paced import idle_waiters
from minibroker.scenario import RunResult, Scenario, ScenarioRunner
from minibroker.trace import Event as TraceEvent

OnTime = Callable[[ScenarioRunner, int], None]
#: float slack when comparing trio seconds to whole milliseconds
_SLACK_MS = 1e-6


class _EndOfMs(trio.abc.Instrument):
    """Calls ``on_time`` for each time of ``times`` once the run has finished that millisecond."""

    def __init__(self, runner: ScenarioRunner, times: Iterator[int], on_time: OnTime) -> None:
        self.runner = runner
        self.times = times
        self.on_time = on_time
        self.target = next(times, None)
        self.done = trio.Event()  # every time was taken
        self.error: BaseException | None = None

    def before_io_wait(self, timeout: float) -> None:
        cluster = self.runner.cluster
        if self.target is None or cluster is None or self.error is not None:
            return
        stats = trio.lowlevel.current_statistics()
        if stats.tasks_runnable or idle_waiters():
            return
        ahead = stats.seconds_to_next_deadline
        if math.isinf(ahead):
            # nothing is due: the run is ending (or stuck); only the times up to now are reached
            next_ms = cluster.clock.now_ms() + 1.0
        else:
            next_ms = (trio.current_time() + ahead - cluster.clock.origin) * 1000
        try:
            while self.target is not None and next_ms >= self.target + 1 - _SLACK_MS:
                self.on_time(self.runner, self.target)
                self.target = next(self.times, None)
        except BaseException as error:  # trio would only log it and drop the instrument
            self.error = error
            self.done.set()
            return
        if self.target is None:
            self.done.set()


def play(
    scenario: Scenario,
    *,
    seed: int | None,
    times: Iterator[int],
    on_time: OnTime,
    sinks: Sequence[Callable[[TraceEvent], object]] = (),
) -> RunResult | None:
    """Run ``scenario`` in virtual time, calling ``on_time`` at the end of each of ``times`` (increasing).

    Returns the run's result if it ended, or None if it was stopped after the last time.
    """
    seed = scenario.seed if seed is None else seed
    runner = ScenarioRunner(scenario, sinks, None)
    instrument = _EndOfMs(runner, times, on_time)
    outcome: list[RunResult] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                outcome.append(await runner.run(seed))
                nursery.cancel_scope.cancel()

            nursery.start_soon(run)
            await instrument.done.wait()
            nursery.cancel_scope.cancel()

    clock = trio.testing.MockClock(autojump_threshold=0)
    with deterministic_scheduling(seed):
        trio.run(main, clock=clock, instruments=[instrument])
    if instrument.error is not None:
        raise instrument.error
    return outcome[0] if outcome else None
