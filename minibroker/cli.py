"""The ``minibroker`` command line. Every error is one line on stderr and a non-zero exit.

Ctrl-C is one line and exit status 130 at any moment: ``entry_point`` installs a
handler that exits at once while the command modules are imported (a KeyboardInterrupt
raised inside an import cannot always be caught cleanly); ``main`` puts Python's
default handler back before the command runs, which then catches KeyboardInterrupt.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Callable, Sequence

from minibroker import __version__
from minibroker.cliutil import Parser, UsageError, speed, whole_number
from minibroker.extras import MissingExtra

INTERRUPTED = "minibroker: interrupted\n"

#: modules that add commands; a module missing from this install is skipped
COMMAND_MODULES = (
    "minibroker.commands",
    "minibroker.tui.commands",
    "minibroker.analytics.commands",
    "minibroker.server.commands",
    "minibroker.chaos.commands",
    "minibroker.retry_service",
)
#: the module of each command: a command line that names one imports only that module (all of them
#: take about half a second, mostly the scenario loader and trio); a test checks it against theirs
COMMAND_HOMES = {
    "run": "minibroker.commands",
    "check": "minibroker.commands",
    "list": "minibroker.commands",
    "snapshot": "minibroker.tui.commands",
    "analyze": "minibroker.analytics.commands",
    "sweep": "minibroker.analytics.commands",
    "serve": "minibroker.server.commands",
    "chaos": "minibroker.chaos.commands",
    "retry-service": "minibroker.retry_service",
}


#: the timer demo's bounds: an hour (the reaper polls every 200 ms: a minute of wall time at most), and
#: the wheel sizes the scenario loader accepts (scenario/loader/limits.py; not imported here: it is slow)
MAX_DEMO_MS = 3_600_000
WHEEL_SIZES = (2, 1024)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or only of the one ``argv`` names first (``COMMAND_HOMES``)."""
    parser = Parser(
        prog="minibroker",
        description="A mini-broker emulator that reproduces Apache Kafka's purgatories and timing wheel.",
    )
    parser.add_argument("--version", action="version", version=f"minibroker {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    demo = commands.add_parser(
        "demo-timer",
        help="watch tasks cascade down Kafka's hierarchical timing wheel",
        description="Arm tasks on a SystemTimer driven by the trio reaper and print each cascade.",
    )
    demo.add_argument(
        "--task",
        dest="tasks",
        type=whole_number(0, MAX_DEMO_MS, "a whole number of ms"),
        action="append",
        metavar="MS",
        help="a task delay in ms (repeatable; default: 350 and 450, which start on levels 2 and 3 of the "
        "default wheel and cascade down to fire on time)",
    )
    demo.add_argument(
        "--tick",
        type=whole_number(1, MAX_DEMO_MS, "a whole number of ms"),
        default=1,
        help="tick of level 1 in ms (default 1)",
    )
    demo.add_argument(
        "--wheel-size",
        type=whole_number(*WHEEL_SIZES, "a number of buckets"),
        default=20,
        help=f"buckets per level, {WHEEL_SIZES[0]}..{WHEEL_SIZES[1]} (default 20)",
    )
    demo.add_argument(
        "--speed",
        type=speed,
        help="run at this multiple of real time, 0.001..1000000 (default: virtual, instant)",
    )

    handlers: dict[str, Callable[[argparse.Namespace], int]] = {"demo-timer": _demo_timer}
    named = argv[0] if argv else None
    for name in (COMMAND_HOMES[named],) if named in COMMAND_HOMES else COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name is not None and name.startswith(error.name):
                continue
            raise
        handlers.update(module.add_parsers(commands))
    parser.set_defaults(handlers=handlers)
    return parser


def _demo_timer(args: argparse.Namespace) -> int:
    from minibroker.demo import run_demo

    delays = args.tasks if args.tasks else [350, 450]
    results = run_demo(delays, tick_ms=args.tick, wheel_size=args.wheel_size, speed=args.speed)
    late = [(d, at) for d, at in results if at != d]
    if late:
        raise UsageError(f"demo-timer: tasks fired off their expiration: {late}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    command = None
    try:
        argv = sys.argv[1:] if argv is None else argv
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        if getattr(signal.getsignal(signal.SIGINT), "minibroker_start_up", False):
            signal.signal(signal.SIGINT, signal.default_int_handler)
        command = args.command
        if command is None:
            parser.print_help()
            return 0
        return args.handlers[command](args)
    except UsageError as error:
        for line in str(error).splitlines():  # a scenario with several problems: one line each
            print(f"minibroker: {line}", file=sys.stderr)
        return 2
    except MissingExtra as error:  # an optional package this command (or option) needs
        print(f"minibroker: {command}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(INTERRUPTED, end="", file=sys.stderr)
        return 130
    except BaseExceptionGroup as group:  # trio may deliver Ctrl-C inside a nursery
        if group.subgroup(KeyboardInterrupt) is not None:
            print(INTERRUPTED, end="", file=sys.stderr)
            return 130
        # rich ends the program with SystemExit(1) when stdout is a closed pipe (`| head`); inside a
        # nursery that arrives wrapped in a group
        exits = group.subgroup(SystemExit)
        if exits is None or group.split(SystemExit)[1] is not None:
            raise
        raise _first(exits) from None


def _first(group: BaseExceptionGroup) -> BaseException:
    leaf = group.exceptions[0]
    return _first(leaf) if isinstance(leaf, BaseExceptionGroup) else leaf


def _interrupted_at_start_up(signum: int, frame: object) -> None:
    os.write(2, INTERRUPTED.encode())
    os._exit(130)


_interrupted_at_start_up.minibroker_start_up = True  # type: ignore[attr-defined]


def entry_point() -> None:
    """The ``minibroker`` program (and ``python -m minibroker``)."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when a host set its own
        signal.signal(signal.SIGINT, _interrupted_at_start_up)
    sys.exit(main())
