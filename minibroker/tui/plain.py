"""``run --tui`` when stdout is not a terminal: plain-text frames, then the usual summary.

The scenario runs in instant virtual time (as without ``--tui``; ``--speed`` is
not needed to read a log) and a frame is printed at the end of every
``interval_ms(span)`` of virtual time in which something happened, then the
last frame and the summary. No escape codes: a rich Console with no colour
system, at ``$COLUMNS`` (default 120) columns.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys

from rich.console import Console
from rich.rule import Rule

from minibroker.cliutil import trace_sink
from minibroker.scenario import Scenario, ScenarioRunner
from minibroker.tui.render import render_frame
from minibroker.tui.state import EventLog, Status, capture, estimate_span_ms
from minibroker.tui.virtual import play

#: about this many frames over the scenario's span
FRAMES = 10


def interval_ms(span_ms: int) -> int:
    """A round interval (1, 2 or 5 × 10^k ms) giving about ``FRAMES`` frames over ``span_ms``."""
    target = max(1.0, span_ms / FRAMES)
    power = 10 ** math.floor(math.log10(target))
    return int(min((step * power for step in (1, 2, 5, 10)), key=lambda v: abs(v - target)))


def plain_console() -> Console:
    try:
        width = int(os.environ.get("COLUMNS", "120"))
    except ValueError:
        width = 120
    return Console(
        file=sys.stdout,
        width=max(80, width),
        color_system=None,
        force_terminal=False,
        highlight=False,
        emoji=False,
    )


def run_plain(scenario: Scenario, args: argparse.Namespace) -> int:
    from minibroker.report import render

    every = interval_ms(estimate_span_ms(scenario))
    print(
        f"minibroker: --tui: stdout is not a terminal; printing a plain frame every {every:,} ms "
        "of virtual time in which something happened",
        file=sys.stderr,
    )
    console = plain_console()
    log = EventLog()
    shown = {"events": -1}

    def on_time(runner: ScenarioRunner, ms: int) -> None:
        cluster = runner.cluster
        if cluster is None or cluster.scheduler.reaper.closed or log.total == shown["events"]:
            return
        shown["events"] = log.total
        frame = capture(runner, log, 0, Status("snapshot"), time_ms=ms)
        console.print(Rule(f"{scenario.name} at {ms:,} ms (virtual)"))
        console.print(render_frame(frame, console))

    with trace_sink(args.trace) as trace:
        sinks = [log] if trace is None else [log, trace]
        result = play(scenario, seed=args.seed, times=itertools.count(0, every), on_time=on_time, sinks=sinks)
    assert result is not None  # the times never run out: the run ends first
    frame = capture(result, log, 0, Status("finished"))
    console.print(Rule(f"{scenario.name} at the end, {result.end_ms:,} ms (virtual)"))
    console.print(render_frame(frame, console))
    render(result, console)
    if trace is not None:
        console.print(f"trace: {trace.events:,} events written to {args.trace}")
    return 0 if result.passed else 1
