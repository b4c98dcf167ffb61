"""Reading a scenario-like TOML document: the error type, line numbers and checked tables.

``Table`` is the only way the loader reads values: each getter checks the type and
range and raises a ``ScenarioError`` naming the file, the line when it can be found,
the key path and the expected form; ``finish`` rejects keys nobody asked for.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

MISSING = object()


class ScenarioError(Exception):
    """A scenario that cannot be loaded; ``str()`` is the one-line message for the user."""


class Context:
    """The file being read: its name, and its text for finding line numbers."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def line_of(self, key_path: str) -> int | None:
        """Best effort: the line of ``steps[3].at`` (the 4th ``[[steps]]``, then ``at =``)."""
        match = re.match(r"([A-Za-z_]+)(?:\[(\d+)\])?((?:\.[^.\[]+)*)", key_path)
        if not match:
            return None
        table, index, rest = match.group(1), match.group(2), match.group(3)
        keys = [k.strip('"') for k in rest.split(".") if k]
        start = None
        if index is not None:
            header = re.compile(rf"^\s*\[\[\s*{re.escape(table)}\s*\]\]")
            seen = -1
            for number, line in enumerate(self.lines):
                if header.match(line):
                    seen += 1
                    if seen == int(index):
                        start = number
                        break
        else:
            header = re.compile(rf"^\s*\[\s*{re.escape(table)}[\].]")
            for number, line in enumerate(self.lines):
                if header.match(line):
                    start = number
                    break
        if start is None:
            plain = re.compile(rf'^\s*"?{re.escape(table)}"?\s*=')
            return next((n + 1 for n, line in enumerate(self.lines) if plain.match(line)), None)
        for key in reversed(keys):  # the innermost key written on a line of its own
            pattern = re.compile(rf'^\s*"?{re.escape(key)}"?\s*=')
            for number in range(start + 1, len(self.lines)):
                if re.match(r"^\s*\[", self.lines[number]):
                    break
                if pattern.match(self.lines[number]):
                    return number + 1
        return start + 1

    def error(self, key_path: str, problem: str) -> ScenarioError:
        line = self.line_of(key_path) if key_path else None
        where = f"{self.path}:{line}" if line else self.path
        message = f"{where}: {key_path}: {problem}" if key_path else f"{where}: {problem}"
        return ScenarioError(printable(message))


def printable(text: str) -> str:
    """The message on one line: control and line-breaking characters (as in a hostile key) escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def describe(value: Any) -> str:
    """A value as echoed in a message: its repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class Table:
    """Typed, checked access to one TOML table; ``finish`` rejects keys nobody asked for."""

    def __init__(self, data: Any, path: str, ctx: Context) -> None:
        if not isinstance(data, dict):
            raise ctx.error(path, f"expected a table, got {describe(data)}")
        self.data = data
        self.path = path
        self.ctx = ctx
        self.used: set[str] = set()

    def sub(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str, problem: str) -> ScenarioError:
        return self.ctx.error(self.sub(key), problem)

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = MISSING) -> Any:
        self.used.add(key)
        if key in self.data:
            return self.data[key]
        if default is MISSING:
            raise self.ctx.error(self.path or key, f"missing key {key!r}")
        return default

    def int(self, key: str, default: Any = MISSING, minimum: int = 0, what: str = "a whole number") -> Any:
        value = self.raw(key, default)
        if value is default and default is not MISSING:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected {what} >= {minimum}, got {describe(value)}")
        if value < minimum:
            raise self.error(key, f"expected {what} >= {minimum}, got {value}")
        return value

    def ms(self, key: str, default: Any = MISSING) -> Any:
        return self.int(key, default, 0, "a whole number of ms")

    def str(self, key: str, default: Any = MISSING, choices: tuple[str, ...] | None = None) -> Any:
        value = self.raw(key, default)
        if value is default and default is not MISSING:
            return value
        if not isinstance(value, str) or not value:
            raise self.error(key, f"expected a non-empty string, got {describe(value)}")
        if choices is not None and value not in choices:
            raise self.error(key, f"expected one of {', '.join(choices)}, got {value!r}")
        return value

    def table(self, key: str) -> Table:
        return Table(self.raw(key, {}), self.sub(key), self.ctx)

    def array(self, key: str) -> list[Any]:
        value = self.raw(key, [])
        if not isinstance(value, list):
            raise self.error(key, f"expected an array, got {describe(value)}")
        return value

    def finish(self, allowed: tuple[str, ...] | None = None) -> None:
        unknown = [k for k in self.data if k not in self.used]
        if unknown:
            expected = ", ".join(sorted(allowed or self.used))
            raise self.error(unknown[0], f"unknown key {unknown[0]!r}; expected one of: {expected}")


def read_document(path: str | Path) -> str:
    """The text of a scenario-like file; a missing or unreadable one is a one-line ScenarioError."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ScenarioError(f"{path}: cannot read the file: {error}") from None


def parse_document(text: str, path: str) -> Table:
    """The TOML root table of a scenario-like file, ready for checked reading."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ScenarioError(f"{path}: malformed TOML: {error}") from None
    return Table(data, "", Context(path, text))
