"""What every CLI command module shares: the one-line usage error and argument types.

A command module (``minibroker.commands``, ``minibroker.tui.commands``, ...) exposes
``add_parsers(subparsers) -> {command name: handler}``; a handler takes the parsed
arguments and returns the exit status, raising ``UsageError`` for bad input.
"""

from __future__ import annotations

import argparse
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


def whole_number(
    minimum: int = 0, maximum: int | None = None, noun: str = "a whole number"
) -> Callable[[str], int]:
    """An argument type: a whole number in [minimum, maximum], refused in one line naming ``noun``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}") from None
        if maximum is not None and not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"expected {noun} {minimum}..{maximum}, got {value}")
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a number >= {minimum}, got {value}")
        return value

    return parse


#: an argument that is a whole number of ms >= 0
whole_ms = whole_number(0, noun="a whole number of ms")


def positive_number(noun: str = "a positive number") -> Callable[[str], float]:
    """An argument type: a finite number > 0, refused in one line naming ``noun``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}") from None
        if not (value > 0 and math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}")
        return value

    return parse


#: an argument that is a multiple of real time
speed = positive_number()


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
    data_dir_help: str = "where the file wheel ([delay_wheel]) keeps its files (kept)",
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
    if data_dir is None:
        data_dir = tempfile.mkdtemp(prefix="minibroker-wheel-")
        print(f"file wheel data kept in {data_dir}", file=sys.stderr, flush=True)
    return attrs.evolve(scenario, delay_wheel={**scenario.delay_wheel, "data_dir": data_dir})
