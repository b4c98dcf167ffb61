"""The live view's logic without a terminal: frames to a recording display, keys handed in directly.

A paused app is fully deterministic (its clock does not move by itself), so stepping
with ``n`` gives exact virtual times; ``math.inf`` speed is instant virtual time.
"""

from __future__ import annotations

import math
import time

import attrs
import trio
import trio.testing

from minibroker.runtime import PaceMeter, deterministic_scheduling
from minibroker.scenario import load_scenario, run_scenario
from minibroker.trace import ListSink
from minibroker.tui.app import SPEED_RANGE, TuiApp
from minibroker.tui.render import expectation_title, render_frame
from tests.tui.helpers import CASCADE, SCENARIOS, recording_console, text_of


class Recorder:
    """A display that keeps every frame."""

    def __init__(self) -> None:
        self.frames = []

    def show(self, frame) -> None:
        self.frames.append(frame)


def _drive(app: TuiApp, keys: str) -> None:
    """Run ``app`` and type ``keys`` one at a time, each once everything has settled."""

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(app.main)
            for key in keys:
                await trio.testing.wait_all_tasks_blocked(1e-4)
                await app.handle_key(key)
            await trio.testing.wait_all_tasks_blocked(1e-4)
            app.stop()

    with deterministic_scheduling(app.seed):
        trio.run(main, clock=app.clock)


def _app(speed: float = 1.0, paused: bool = True, sinks=()) -> tuple[TuiApp, Recorder]:
    scenario = load_scenario(CASCADE)
    display = Recorder()
    return TuiApp(scenario, display, seed=scenario.seed, speed=speed, paused=paused, sinks=sinks), display


def test_n_steps_from_one_instant_with_events_to_the_next():
    expected = ListSink()
    run_scenario(load_scenario(CASCADE), sinks=[expected])
    seen = ListSink()
    app, display = _app(sinks=[seen])
    _drive(app, "nnnnn")
    assert [(f.time_ms, f.status.mode) for f in display.frames] == [
        (0, "paused"),
        (340, "paused"),  # the reaper's 200 ms poll changed nothing: no stop there
        (350, "paused"),
        (400, "paused"),
        (440, "paused"),
        (450, "finished"),
    ]
    assert display.frames[-1].status.note == "all expectations hold"
    assert app.result is not None and app.result.passed
    assert list(seen) == list(expected)  # stepping by hand leaves the run as it is


def test_the_frame_after_a_step_shows_the_cascade():
    app, display = _app()
    _drive(app, "n")
    frame = display.frames[-1]
    console = recording_console(120, 200)
    lines = text_of(render_frame(frame, console, events=1), 120)
    assert lines[1].startswith(" t = 340 ms virtual (span ~450 ms)   paused ×1 (1 s = 1 s)   broker 0")
    assert lines[4].startswith("│ L1    1 ▸ ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  1  ·  ·")
    assert lines[5].startswith("│ L2   20   ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·▸ ·  ·  ·")
    event = next(line for line in lines if line.startswith("│     340"))
    assert "b0 timer.reinsert      task-350 from bucket 340 → L1 slot 10" in event


def test_keys_pause_speed_broker_and_quit():
    app, display = _app(speed=2.0, paused=False)
    app.set_paused(True)  # hold the run still while the keys are checked
    seen = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(app.main)
            for key in " + +-b b b x q":
                await trio.testing.wait_all_tasks_blocked(1e-4)
                await app.handle_key(key)
                seen.append((key, app.paused, app.speed, app.clock.rate, app.broker, app.quit))

    trio.run(main, clock=app.clock)
    assert seen == [
        (" ", False, 2.0, 2.0, 0, False),
        ("+", False, 4.0, 4.0, 0, False),
        (" ", True, 4.0, 0.0, 0, False),
        ("+", True, 8.0, 0.0, 0, False),  # paused: the speed waits for the resume
        ("-", True, 4.0, 0.0, 0, False),
        ("b", True, 4.0, 0.0, 1, False),
        (" ", False, 4.0, 4.0, 1, False),
        ("b", False, 4.0, 4.0, 2, False),
        (" ", True, 4.0, 0.0, 2, False),
        ("b", True, 4.0, 0.0, 0, False),
        (" ", False, 4.0, 4.0, 0, False),
        ("x", False, 4.0, 4.0, 0, False),  # not a key of ours
        (" ", True, 4.0, 0.0, 0, False),
        ("q", True, 4.0, 0.0, 0, True),
    ]
    assert app.result is None
    # one frame at the start, then one per key that changed something (not x, not q)
    assert [f.broker for f in display.frames] == [0, 0, 0, 0, 0, 0, 1, 1, 2, 2, 0, 0, 0]
    assert [f.status.mode for f in display.frames][:4] == ["paused", "running", "running", "paused"]


def test_speed_stays_in_range():
    app, _ = _app(speed=SPEED_RANGE[1])
    app.set_speed(app.speed * 2)
    assert app.speed == SPEED_RANGE[1]
    app.set_speed(0)
    assert app.speed == SPEED_RANGE[0]


def test_the_live_view_does_not_change_the_run():
    expected = ListSink()
    run_scenario(load_scenario(CASCADE), sinks=[expected])
    seen = ListSink()
    app, display = _app(speed=math.inf, paused=False, sinks=[seen])
    with deterministic_scheduling(app.seed):
        trio.run(app.main, clock=app.clock)
    assert list(seen) == list(expected)
    assert [(f.time_ms, f.status.mode) for f in display.frames] == [(0, "running"), (450, "finished")]
    assert app.result is not None and app.result.passed


def test_frames_come_between_whole_milliseconds():
    app, _ = _app(speed=0.7, paused=False)
    deadlines = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(app.main)
            await trio.testing.wait_all_tasks_blocked(1e-4)
            origin = app.runner.cluster.clock.origin
            for now in (0.0, 0.07, 0.1249999999, 0.33):  # FRAME_S × 0.7 = 0.175 s ahead
                app.clock.advance_to(origin + now)
                ms = (app._frame_deadline() - origin) * 1000
                deadlines.append(round(ms, 6))
            app.stop()

    trio.run(main, clock=app.clock)
    assert deadlines == [175.001, 245.001, 300.001, 505.001]


class SlowDisplay(Recorder):
    """Drawing a frame takes 0.3 s of real time, during which virtual time stands still."""

    def show(self, frame) -> None:
        super().show(frame)
        time.sleep(0.3)


def test_the_header_shows_the_speed_the_run_kept_when_drawing_holds_it_back():
    # real time: each 0.25 s of pacing is followed by a 0.3 s frame, so a run asked to go at ×1
    # keeps about ×0.45; the meter needs 1 s of samples, the scenario lasts 2 s of virtual time
    scenario = load_scenario(str(SCENARIOS / "follower_paused_timeout.toml"))
    display = SlowDisplay()
    app = TuiApp(scenario, display, seed=scenario.seed, speed=1.0)
    with deterministic_scheduling(app.seed):
        trio.run(app.main, clock=app.clock)
    assert app.result is not None and app.result.passed  # exact times hold although the run lagged
    running = [f.status for f in display.frames if f.status.mode == "running"]
    assert running[0].achieved is None  # too few samples yet
    behind = [s.achieved for s in running if s.achieved is not None]
    assert behind, running
    # tolerance: on a loaded machine the kept speed is lower still, never above 0.9 × the asked one
    assert all(0 < kept < 0.9 for kept in behind)


def test_the_meter_reports_a_run_behind_only_against_the_speed_asked_for():
    meter = PaceMeter(window_s=3.0, min_s=1.0)
    meter.sample(0.0, 0.0)
    meter.sample(0.5, 0.5)
    assert meter.rate() is None  # less than 1 s of real time observed
    meter.sample(3.0, 1.0)
    assert meter.rate() == 1.0 / 3.0
    assert meter.behind(0.6) == 1.0 / 3.0
    assert meter.behind(0.35) is None  # within 10% of the asked speed
    meter.sample(6.0, 4.0)  # the window keeps about 3 s: the oldest samples leave
    assert meter.rate() == 3.0 / 3.0
    meter.reset()
    assert meter.rate() is None


def test_the_quit_line_counts_the_expectations_the_last_frame_counted(capsys):
    from minibroker.tui.app import _quit_early

    app, display = _app()
    _drive(app, "nn")  # the 350 ms task fires: the cascade's checks decided so far pass
    shown = display.frames[-1]
    assert app.result is None and shown.time_ms == 350
    assert expectation_title(shown) == "expectations · 5 passed · 0 failed · 5 to come"
    assert _quit_early(app) == 0
    assert capsys.readouterr().err == (
        "minibroker: quit at 350 ms (virtual), before the scenario ended; "
        "expectations: 5 passed, 0 failed, 5 to come\n"
    )


def test_quitting_after_a_frame_showed_a_failure_exits_1(capsys):
    from minibroker.tui.app import _quit_early
    from minibroker.tui.state import ExpectationLine

    app, display = _app()
    _drive(app, "n")
    failed = ExpectationLine("expect[9]", "hw 5", False, "hw 3")
    app.shown = attrs.evolve(display.frames[-1], expectations=(*display.frames[-1].expectations[:9], failed))
    assert expectation_title(app.shown) == "expectations · 3 passed · 1 failed · 6 to come"
    assert _quit_early(app) == 1
    assert capsys.readouterr().err == (
        "minibroker: quit at 340 ms (virtual), before the scenario ended; "
        "expectations: 3 passed, 1 failed, 6 to come\n"
    )
