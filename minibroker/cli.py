"""The ``minibroker`` command line. Every error is one line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from minibroker import __version__


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit status 2."""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of ms, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def _speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``prog: error: ...``) and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="minibroker",
        description="A mini-broker emulator that reproduces Apache Kafka's purgatories and timing wheel.",
    )
    parser.add_argument("--version", action="version", version=f"minibroker {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    demo = commands.add_parser(
        "demo-timer",
        help="watch tasks cascade down Kafka's hierarchical timing wheel",
        description="Arm tasks on a SystemTimer driven by the trio reaper and print each cascade.",
    )
    demo.add_argument(
        "--task",
        dest="tasks",
        type=_positive_int,
        action="append",
        metavar="MS",
        help="a task delay in ms (repeatable; default: the seed articles' 350 and 450)",
    )
    demo.add_argument("--tick", type=_positive_int, default=1, help="tick of level 1 in ms (default 1)")
    demo.add_argument("--wheel-size", type=_positive_int, default=20, help="buckets per level (default 20)")
    demo.add_argument(
        "--speed", type=_speed, help="run at this multiple of real time (default: virtual, instant)"
    )

    run = commands.add_parser(
        "run",
        help="run a scenario and check its expectations",
        description="Run a TOML scenario on an emulated cluster (virtual time unless --speed/--realtime); "
        "exit 0 if every expectation holds, 1 if one fails, 2 on bad input.",
    )
    run.add_argument("file", metavar="FILE.toml")
    run.add_argument(
        "--seed", type=_positive_int, help="the seed for same-instant scheduling (default: the file's)"
    )
    pace = run.add_mutually_exclusive_group()
    pace.add_argument("--speed", type=_speed, help="run at X times real time instead of instantly")
    pace.add_argument("--realtime", action="store_true", help="run in real time (--speed 1)")
    run.add_argument(
        "--trace", metavar="PATH", help="write every event to PATH (.jsonl, or .parquet with pyarrow)"
    )
    run.add_argument("--json", action="store_true", help="print a machine-readable summary instead of tables")
    run.add_argument("--quiet", action="store_true", help="print nothing but failures; the exit status tells")

    check = commands.add_parser("check", help="validate scenarios without running them")
    check.add_argument("files", metavar="FILE.toml", nargs="+")

    listing = commands.add_parser("list", help="show the bundled scenarios")
    listing.add_argument("--dir", help="where to look (default: ./scenarios, then the checkout's scenarios/)")
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
        if args.command == "demo-timer":
            return _demo_timer(args)
        from minibroker import commands

        handlers = {"run": commands.run, "check": commands.check, "list": commands.list_scenarios}
        if args.command in handlers:
            return handlers[args.command](args)
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
    parser.error(f"unknown command {args.command!r}")
    return 2


def entry_point() -> None:
    sys.exit(main())
