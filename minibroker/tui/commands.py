"""The TUI's commands: ``minibroker snapshot`` (``run --tui`` is a flag of ``run``, see ``app.run_tui``).

``snapshot FILE.toml --at MS`` runs the scenario in virtual time to the end of
millisecond MS (the run is the one ``minibroker run`` makes, same seed, same
order of events), renders one frame and prints it, or writes it as an SVG
(``--svg``) and/or a PNG (``--png``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from minibroker.cliutil import MAX_SEED, UsageError, seed, whole_ms, whole_number
from minibroker.scenario import ScenarioError, ScenarioRunner, load_scenario
from minibroker.scenario.library import resolve
from minibroker.tui.picture import frame_svg
from minibroker.tui.render import render_frame
from minibroker.tui.state import EventLog, Frame, Status, capture
from minibroker.tui.virtual import play

#: columns of a picture
DEFAULT_WIDTH = 120
MAX_WIDTH = 1000
#: latest events a frame lists at most
MAX_EVENTS_SHOWN = 1000
#: a broker id (scenarios have at most loader/limits.py's MAX_BROKERS brokers)
_broker = whole_number(0, 999, "a broker id")


def add_parsers(commands: argparse._SubParsersAction) -> dict[str, Callable[[argparse.Namespace], int]]:
    """``snapshot``."""
    parser = commands.add_parser(
        "snapshot",
        help="the TUI's view of a scenario at a virtual time, on the terminal or as SVG/PNG",
        description="Run a scenario in virtual time to the end of millisecond MS and render what "
        "`run --tui` shows then: the chosen broker's timing wheel and delay queue, the purgatories, "
        "the partitions, the latest events and the expectations. Prints it, or writes --svg/--png.",
    )
    parser.add_argument(
        "file", metavar="FILE.toml", help="a scenario file, or the name of a bundled one (minibroker list)"
    )
    parser.add_argument("--at", type=whole_ms, required=True, metavar="MS", help="virtual time in ms")
    parser.add_argument("--svg", metavar="PATH", help="write the frame as an SVG picture")
    parser.add_argument(
        "--png", metavar="PATH", help="write the frame as a PNG (needs rsvg-convert or the png extra)"
    )
    parser.add_argument("--broker", type=_broker, default=0, help="whose timing wheel to show (default 0)")
    parser.add_argument(
        "--seed",
        type=seed,
        help=f"the seed for same-instant scheduling, 0..{MAX_SEED} (default: the file's)",
    )
    parser.add_argument(
        "--width",
        type=whole_number(0, MAX_WIDTH, "a width in columns"),
        default=DEFAULT_WIDTH,
        help=f"width of the --svg/--png picture, in terminal columns, 60..{MAX_WIDTH} "
        f"(default {DEFAULT_WIDTH}); "
        "printed on the terminal, the frame takes the terminal's width",
    )
    parser.add_argument(
        "--events",
        type=whole_number(0, MAX_EVENTS_SHOWN, "a number of events"),
        default=14,
        help=f"latest events shown, 0..{MAX_EVENTS_SHOWN} (default 14)",
    )
    return {"snapshot": snapshot}


def snapshot_frame(path: str, at: int, *, broker: int = 0, seed: int | None = None) -> Frame:
    """The frame at the end of ms ``at`` (or at the end of the run, if it ends before)."""
    try:
        scenario = load_scenario(resolve(path))
    except ScenarioError as error:
        raise UsageError(str(error)) from None
    if broker >= scenario.cluster.brokers:
        raise UsageError(
            f"snapshot: --broker {broker}: the scenario has brokers 0..{scenario.cluster.brokers - 1}"
        )
    log = EventLog()
    taken: list[Frame] = []

    def on_time(runner: ScenarioRunner, ms: int) -> None:
        taken.append(capture(runner, log, broker, Status("snapshot"), time_ms=ms))

    result = play(scenario, seed=seed, times=iter([at]), on_time=on_time, sinks=[log])
    if result is not None and result.end_ms <= at:
        note = f"the run ended at {result.end_ms:,} ms" if result.end_ms < at else ""
        return capture(result, log, broker, Status("finished", note=note), time_ms=at)
    return taken[0]


def snapshot(args: argparse.Namespace) -> int:
    if args.width < 60:
        raise UsageError("snapshot: --width must be at least 60 columns")
    frame = snapshot_frame(args.file, args.at, broker=args.broker, seed=args.seed)
    if not args.svg and not args.png:
        console = Console()
        console.print(render_frame(frame, console, events=args.events))
        return 0
    svg = frame_svg(
        frame,
        width=args.width,
        events=args.events,
        title=f"minibroker snapshot {Path(args.file).name} --at {args.at}",
    )
    if args.svg:
        try:
            Path(args.svg).write_text(svg, encoding="utf-8")
        except OSError as error:
            raise UsageError(f"--svg: cannot write {args.svg}: {error.strerror or error}") from None
        print(f"wrote {args.svg}", file=sys.stderr)
    if args.png:
        from minibroker.tui.png import svg_to_png

        name = svg_to_png(svg, args.png)
        print(f"wrote {args.png} ({name})", file=sys.stderr)
    return 0
