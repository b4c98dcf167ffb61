"""The ``minibroker`` command line. Every error is one line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from minibroker import __version__
from minibroker.cliutil import Parser, UsageError, speed, whole_ms

#: modules that add commands; a module missing from this install is skipped
COMMAND_MODULES = (
    "minibroker.commands",
    "minibroker.tui.commands",
    "minibroker.pipeline.commands",
    "minibroker.wire.commands",
    "minibroker.chaos.commands",
)


def build_parser() -> argparse.ArgumentParser:
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
        type=whole_ms,
        action="append",
        metavar="MS",
        help="a task delay in ms (repeatable; default: the seed articles' 350 and 450)",
    )
    demo.add_argument("--tick", type=whole_ms, default=1, help="tick of level 1 in ms (default 1)")
    demo.add_argument("--wheel-size", type=whole_ms, default=20, help="buckets per level (default 20)")
    demo.add_argument(
        "--speed", type=speed, help="run at this multiple of real time (default: virtual, instant)"
    )

    handlers: dict[str, Callable[[argparse.Namespace], int]] = {"demo-timer": _demo_timer}
    for name in COMMAND_MODULES:
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

    if args.tick < 1 or args.wheel_size < 1:
        raise UsageError("demo-timer: --tick and --wheel-size must be >= 1")
    delays = args.tasks if args.tasks else [350, 450]
    results = run_demo(delays, tick_ms=args.tick, wheel_size=args.wheel_size, speed=args.speed)
    late = [(d, at) for d, at in results if at != d]
    if late:
        raise UsageError(f"demo-timer: tasks fired off their expiration: {late}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return args.handlers[args.command](args)
    except UsageError as error:
        print(f"minibroker: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("minibroker: interrupted", file=sys.stderr)
        return 130
    except BaseExceptionGroup as group:  # trio may deliver Ctrl-C inside a nursery
        if group.subgroup(KeyboardInterrupt) is None:
            raise
        print("minibroker: interrupted", file=sys.stderr)
        return 130


def entry_point() -> None:
    sys.exit(main())
