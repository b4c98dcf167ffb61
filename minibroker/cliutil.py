"""What every CLI command module shares: the one-line usage error and argument types.

A command module (``minibroker.commands``, ``minibroker.tui.commands``, ...) exposes
``add_parsers(subparsers) -> {command name: handler}``; a handler takes the parsed
arguments and returns the exit status, raising ``UsageError`` for bad input.
"""

from __future__ import annotations

import argparse


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``prog: error: ...``) and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def whole_ms(text: str) -> int:
    """An argument that is a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of ms, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def speed(text: str) -> float:
    """An argument that is a positive number (a multiple of real time)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value
