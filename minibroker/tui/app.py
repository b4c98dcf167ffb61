"""``minibroker run FILE.toml --tui``: the live view, one trio task drawing, one reading keys.

The scenario runs on a ``PacedClock`` (virtual time at ``speed`` times real time
that moves only while every task waits, so the run is the same as in instant
virtual time, exact milliseconds included). Three tasks share one trio run:

- the runner plays the scenario;
- the main task captures a ``Frame`` and draws it (rich ``Live``, auto refresh
  off, so nothing renders from another thread) about four times a second of
  real time, and at once when a key asks for it; the header shows the speed
  asked for and, when the run falls behind it (virtual time stands still while
  tasks or the drawing compute), the speed it actually kept over the last few
  seconds (``PaceMeter``);
- the key task (when stdin is a terminal) handles space (pause/resume), ``n``
  (pause and step to the next instant where something happens), ``+``/``-``
  (double/halve the speed), ``b`` (next broker), ``q`` (quit).

When the run ends, the last frame stays until ``q`` (or ends the view at once
when there is no keyboard), then the usual summary is printed and the exit status
is the run's (0 or 1). ``q`` before the end prints how far the run got, counting the
expectations as the latest frame did, and exits 0, or 1 if one had failed. The terminal
(alternate screen, cursor, key mode) is restored on exit, Ctrl-C and errors.
With stdout not a terminal, ``run_plain`` prints plain frames instead.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

import trio
import trio.testing
from rich.console import Console
from rich.live import Live

from minibroker.cliutil import UsageError, trace_sink
from minibroker.runtime import deterministic_scheduling
from minibroker.runtime.paced import PacedClock, PaceMeter
from minibroker.scenario import RunResult, Scenario, ScenarioRunner
from minibroker.trace import Event as TraceEvent
from minibroker.tui.keys import cbreak, read_keys
from minibroker.tui.render import render_frame
from minibroker.tui.state import EventLog, Frame, Status, Tally, capture, default_speed

#: real seconds between two frames while the run goes on
FRAME_S = 0.25
#: the speed keys stay within these multiples of real time
SPEED_RANGE = (1e-4, 1e4)
#: ``n`` gives up after this many empty wake-ups (reaper polls, idle checks) in a row
STEP_LIMIT = 10_000
#: the TUI's ``wait_all_tasks_blocked`` cushion: above the runner's 0, so never woken with it
IDLE_CUSHION_S = 1e-6


class Display(Protocol):
    def show(self, frame: Frame) -> None: ...


class LiveDisplay:
    """Draws frames on a rich ``Live`` screen, fitted to the terminal's height at each frame."""

    def __init__(self, live: Live) -> None:
        self.live = live

    def show(self, frame: Frame) -> None:
        console = self.live.console
        self.live.update(render_frame(frame, console, height=console.size.height), refresh=True)


class TuiApp:
    """The live view's state and tasks; ``main`` is the trio entry point."""

    def __init__(
        self,
        scenario: Scenario,
        display: Display,
        *,
        seed: int,
        speed: float,
        key_fd: int | None = None,
        sinks: Sequence[Callable[[TraceEvent], object]] = (),
        paused: bool = False,
    ) -> None:
        self.scenario = scenario
        self.display = display
        self.seed = seed
        self.speed = speed
        self.key_fd = key_fd
        self.paused = paused
        self.log = EventLog()
        self.runner = ScenarioRunner(scenario, [self.log, *sinks], None)
        self.clock = PacedClock(0.0 if paused else speed)
        self.meter = PaceMeter()
        self.broker = 0
        self.result: RunResult | None = None
        self.quit = False
        self.frames = 0
        self.shown: Frame | None = None  # the latest frame
        self._redraw = trio.Event()
        self._nursery: trio.Nursery | None = None

    # --- what is shown ---------------------------------------------------------------------------
    def status(self) -> Status:
        keys = self.key_fd is not None
        if self.result is not None:
            failed = sum(1 for r in self.result.results if not r.passed)
            verdict = "all expectations hold" if not failed else f"{failed} expectation(s) failed"
            return Status("finished", None, keys, verdict + (" — q to quit" if keys else ""))
        if self.paused:
            return Status("paused", self.speed, keys)
        return Status("running", self.speed, keys, achieved=self.meter.behind(self.speed))

    def frame(self) -> Frame:
        frame = capture(self.result or self.runner, self.log, self.broker, self.status())
        self.shown = frame
        return frame

    def redraw(self) -> None:
        self._redraw.set()

    # --- controls ----------------------------------------------------------------------------------
    def set_paused(self, paused: bool) -> None:
        self.paused = paused
        self.clock.rate = 0.0 if paused else self.speed
        self.meter.reset()

    def set_speed(self, speed: float) -> None:
        low, high = SPEED_RANGE
        self.speed = min(high, max(low, speed))
        if not self.paused:
            self.clock.rate = self.speed
        self.meter.reset()

    def next_broker(self) -> None:
        self.broker = (self.broker + 1) % self.scenario.cluster.brokers

    def stop(self) -> None:
        self.quit = True
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    async def step(self) -> None:
        """Pause, then move virtual time to the next instant at which an event happens (or the run ends)."""
        self.set_paused(True)
        runner, log = self.runner, self.log
        before = (log.total, len(runner.results))
        for _ in range(STEP_LIMIT):
            await trio.testing.wait_all_tasks_blocked(IDLE_CUSHION_S)
            if self.result is not None or (log.total, len(runner.results)) != before:
                break
            ahead = trio.lowlevel.current_statistics().seconds_to_next_deadline
            if math.isinf(ahead):
                break
            self.clock.advance_to(trio.current_time() + max(0.0, ahead))

    async def handle_key(self, key: str) -> None:
        if key == " ":
            self.set_paused(not self.paused)
        elif key == "n":
            await self.step()
        elif key in "+=":
            self.set_speed(self.speed * 2)
        elif key in "-_":
            self.set_speed(self.speed / 2)
        elif key == "b":
            self.next_broker()
        elif key in "qQ":
            self.stop()
            return
        else:
            return
        self.redraw()

    # --- tasks -------------------------------------------------------------------------------------
    async def main(self) -> None:
        """The run, then (from this task) the frames; keys once the cluster is up.

        The TUI never wakes in the same scheduling batch as the simulation: it starts its
        tasks and draws only while every simulation task waits (``wait_all_tasks_blocked``
        with a cushion above the runner's own 0), and its frame deadlines fall between
        whole milliseconds. So the seeded order of same-instant tasks, hence the run, is
        the one ``minibroker run`` makes.
        """
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._play)
            while self.runner.cluster is None and self.result is None:
                await trio.testing.wait_all_tasks_blocked(IDLE_CUSHION_S)
            if self.key_fd is not None:
                nursery.start_soon(read_keys, self.key_fd, self.handle_key)
            await self._frames()

    async def _play(self) -> None:
        self.result = await self.runner.run(self.seed)
        self.redraw()

    def _frame_deadline(self) -> float:
        """About ``FRAME_S`` of real time ahead, in virtual seconds, never on a whole millisecond."""
        deadline = trio.current_time() + FRAME_S * self.clock.rate
        assert self.runner.cluster is not None
        ms = (deadline - self.runner.cluster.clock.origin) * 1000
        if abs(ms - round(ms)) < 1e-3:
            deadline += 1e-6  # a millisecond's simulation tasks wake alone, the frame a µs later
        return deadline

    async def _frames(self) -> None:
        while True:
            if self.result is None and not self.paused:
                self.meter.sample(self.clock.real_time(), trio.current_time())
            self.display.show(self.frame())
            self.frames += 1
            if self.result is not None and self.key_fd is None:
                self.stop()
                return
            self._redraw = trio.Event()
            if self.result is None and 0 < self.clock.rate < math.inf:
                with trio.move_on_at(self._frame_deadline()):
                    await self._redraw.wait()
            else:
                await self._redraw.wait()


@contextlib.contextmanager
def terminal_screen(console: Console, key_fd: int | None) -> Iterator[Live]:
    """Key mode (if any) and the alternate screen; both restored however the block ends."""
    with contextlib.ExitStack() as stack:
        if key_fd is not None:
            stack.enter_context(cbreak(key_fd))
        live = Live(
            console=console,
            screen=True,
            auto_refresh=False,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        stack.enter_context(live)
        yield live


def run_tui(scenario: Scenario, args: argparse.Namespace) -> int:
    """The ``run --tui`` command: the live view on a terminal, plain frames otherwise."""
    if args.json or args.quiet:
        raise UsageError("--tui draws the run on the terminal: it cannot be combined with --json or --quiet")
    if not sys.stdout.isatty():
        from minibroker.tui.plain import run_plain

        return run_plain(scenario, args)
    speed = 1.0 if args.realtime else (args.speed or default_speed(scenario))
    seed = scenario.seed if args.seed is None else args.seed
    key_fd = 0 if sys.stdin.isatty() else None
    console = Console()
    with trace_sink(args.trace) as trace:
        app = TuiApp(
            scenario,
            _NoDisplay(),
            seed=seed,
            speed=speed,
            key_fd=key_fd,
            sinks=[trace] if trace is not None else [],
        )
        with terminal_screen(console, key_fd) as live:
            app.display = LiveDisplay(live)
            with deterministic_scheduling(seed):
                trio.run(app.main, clock=app.clock)
    if app.result is None:
        return _quit_early(app)
    from minibroker.report import render

    render(app.result, console)
    if trace is not None:
        console.print(f"trace: {trace.events:,} events written to {args.trace}")
    return 0 if app.result.passed else 1


def _quit_early(app: TuiApp) -> int:
    """``q`` before the end: say how far the run got, as the last frame showed it; exit 0, or 1 if an
    expectation had failed by then.

    The line counts the latest frame's expectations with the frame's own ``Tally``, so it says what
    the panel title said. A user quit is not a failure, but a run that has already shown a failed
    expectation keeps the exit status 1 it would have ended with.
    """
    frame = app.shown if app.shown is not None else app.frame()
    tally = Tally.of(frame.expectations)
    print(
        f"minibroker: quit at {frame.time_ms:,} ms (virtual), before the scenario ended; "
        f"expectations: {', '.join(tally.parts())}",
        file=sys.stderr,
    )
    return 1 if tally.failed else 0


class _NoDisplay:
    def show(self, frame: Frame) -> None:
        return None


__all__ = ["LiveDisplay", "TuiApp", "run_tui"]
