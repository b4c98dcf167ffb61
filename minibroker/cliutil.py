"""What every CLI command module shares: the one-line usage error and argument types.

A command module (``minibroker.commands``, ``minibroker.tui.commands``, ...) exposes
``add_parsers(subparsers) -> {command name: handler}``; a handler takes the parsed
arguments and returns the exit status, raising ``UsageError`` for bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``prog: error: ...``) and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


#: the largest seed any command takes: 64 bits, unsigned
MAX_SEED = 2**64 - 1
#: what an argument echoes of the text it refuses
ECHOED = 40


def _echo(text: str) -> str:
    """``text`` quoted, cut to ``ECHOED`` characters (thousands of digits stay one short line)."""
    return repr(text) if len(text) <= ECHOED else f"{text[:ECHOED]!r}... ({len(text):,} characters)"


def whole_number(
    minimum: int = 0, maximum: int | None = None, noun: str = "a whole number"
) -> Callable[[str], int]:
    """An argument type: a whole number in [minimum, maximum], refused in one line naming ``noun``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:  # not a number, or one of more digits than int() reads
            raise argparse.ArgumentTypeError(f"expected {noun}, got {_echo(text)}") from None
        if maximum is not None and not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"expected {noun} {minimum}..{maximum}, got {value}")
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a number >= {minimum}, got {value}")
        return value

    return parse


#: the longest virtual time an argument names: one day, as a scenario's times (loader/limits.py's MAX_MS,
#: not imported: that would load the scenario package at every command's start; a test keeps them equal)
MAX_MS = 86_400_000
#: an argument that is a whole number of ms, 0 .. MAX_MS
whole_ms = whole_number(0, MAX_MS, "a whole number of ms")
#: an argument that is a seed: 0 .. 2^64 - 1
seed = whole_number(0, MAX_SEED, "a seed")


def positive_number(
    noun: str = "a positive number", low: float | None = None, high: float | None = None
) -> Callable[[str], float]:
    """An argument type: a finite number > 0 (within [low, high] when given), refused in one line
    naming ``noun``."""
    bounds = f" from {low:g} to {high:g}" if low is not None and high is not None else ""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun}{bounds}, got {_echo(text)}") from None
        if not (value > 0 and math.isfinite(value)) or not (low or 0) <= value <= (high or math.inf):
            raise argparse.ArgumentTypeError(f"expected {noun}{bounds}, got {_echo(text)}")
        return value

    return parse


#: an argument that is a multiple of real time (a thousandth of real time plays a second in 17 min)
speed = positive_number("a speed", 0.001, 1_000_000)


def out_dir(path: str) -> Path:
    """The ``--out`` directory, made if missing; a file there, or no permission, is a UsageError."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {path!r} is a file; expected a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"--out {path!r}: {error.strerror or error}") from None
    return out


def add_data_dir_options(
    parser: argparse.ArgumentParser,
    data_dir_help: str = "where the delayed messages' file wheel ([delay_wheel]) keeps its files (kept)",
) -> None:
    """``--data-dir``/``--keep-data``, for the commands that run a scenario's file wheel."""
    parser.add_argument("--data-dir", metavar="DIR", help=data_dir_help)
    parser.add_argument(
        "--keep-data", action="store_true", help="keep the file wheel's temporary directory and print it"
    )


def with_data_dir(scenario: Any, args: argparse.Namespace) -> Any:
    """The scenario with ``--data-dir``/``--keep-data`` applied to its ``[delay_wheel]`` (neither given:
    unchanged, and the run puts the wheel in a fresh temporary directory removed when it ends)."""
    import attrs

    data_dir = getattr(args, "data_dir", None)
    if not (data_dir or getattr(args, "keep_data", False)):
        return scenario
    if scenario.delay_wheel is None:
        option = "--data-dir" if data_dir else "--keep-data"
        raise UsageError(f"{option}: the scenario has no [delay_wheel] section (no files to keep)")
    if data_dir is not None:
        from minibroker.scenario.loader.limits import directory_problem

        problem = directory_problem(data_dir)
        if problem is not None:
            raise UsageError(f"--data-dir: {problem}")
    else:
        data_dir = tempfile.mkdtemp(prefix="minibroker-wheel-")
        print(f"file wheel data kept in {data_dir}", file=sys.stderr, flush=True)
    return attrs.evolve(scenario, delay_wheel={**scenario.delay_wheel, "data_dir": data_dir})


def trace_sink(path: str | None) -> contextlib.AbstractContextManager:
    """The ``--trace PATH`` option's sink, closed on exit (None without the option); a path it cannot
    write is a usage error."""
    if not path:
        return contextlib.nullcontext(None)
    from minibroker.trace import open_sink

    try:
        sink = open_sink(path)
    except (ValueError, RuntimeError, OSError) as error:
        raise UsageError(f"--trace: {error}") from None
    return contextlib.closing(sink)
