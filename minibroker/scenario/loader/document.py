"""Reading a scenario-like TOML document: the error type, line numbers and checked tables.

``Table`` is the only way the loader reads values: each getter checks the type and
range and raises a ``ScenarioError`` naming the file, the line when it can be found,
the key path and the expected form; ``finish`` rejects keys nobody asked for.

Before any table is read, the document itself is bounded: at most ``MAX_DOCUMENT_BYTES``,
UTF-8 (a byte-order mark is accepted), tables and arrays nested at most ``MAX_NESTING``
deep, every integer within 64 bits (TOML's own range). Values echoed in messages are
cut to ``ECHO`` characters with the original length, so every message line is bounded.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from minibroker.scenario.loader.limits import MAX_MS

MISSING = object()
MAX_DOCUMENT_BYTES = 2 * 1024 * 1024  # a scenario is kilobytes; TOML parsing takes seconds per MB
MAX_NESTING = 32
INT64 = (-(2**63), 2**63 - 1)
ECHO = 40  # characters of a value echoed in a message
MAX_LINE = 1000  # characters of one message line, whatever it echoes


class ScenarioError(Exception):
    """A scenario that cannot be loaded: ``problems`` are one-line messages, ``str()`` joins them."""

    def __init__(self, *problems: str) -> None:
        super().__init__("\n".join(problems))
        self.problems = list(problems)


class Context:
    """The file being read: its name, and its text for finding line numbers.

    Where each table starts is found once per table name, so that reporting a problem
    in each of thousands of steps stays linear in the size of the file.
    """

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()
        self._starts: dict[str, tuple[list[int], int | None, int | None]] = {}

    def _table_starts(self, table: str) -> tuple[list[int], int | None, int | None]:
        """Lines (0-based) of each ``[[table]]``, of the first ``[table]``, of the first ``table =``."""
        if table not in self._starts:
            array = re.compile(rf"^\s*\[\[\s*{re.escape(table)}\s*\]\]")
            header = re.compile(rf"^\s*\[\s*{re.escape(table)}[\].]")
            plain = re.compile(rf'^\s*"?{re.escape(table)}"?\s*=')
            arrays = [n for n, line in enumerate(self.lines) if array.match(line)]
            first = next((n for n, line in enumerate(self.lines) if header.match(line)), None)
            inline = next((n for n, line in enumerate(self.lines) if plain.match(line)), None)
            self._starts[table] = (arrays, first, inline)
        return self._starts[table]

    def line_of(self, key_path: str) -> int | None:
        """Best effort: the line of ``steps[3].at`` (the 4th ``[[steps]]``, then ``at =``)."""
        match = re.match(r"([A-Za-z_]+)(?:\[(\d+)\])?((?:\.[^.\[]+)*)", key_path)
        if not match:
            return None
        table, index, rest = match.group(1), match.group(2), match.group(3)
        keys = [k.strip('"') for k in rest.split(".") if k]
        arrays, first, inline = self._table_starts(table)
        start = first
        if index is not None:
            start = arrays[int(index)] if int(index) < len(arrays) else None
        if start is None:
            return None if inline is None else inline + 1
        for key in reversed(keys):  # the innermost key written on a line of its own
            pattern = re.compile(rf'^\s*"?{re.escape(key)}"?\s*=')
            for number in range(start + 1, len(self.lines)):
                if re.match(r"^\s*\[", self.lines[number]):
                    break
                if pattern.match(self.lines[number]):
                    return number + 1
        return start + 1

    def error(self, key_path: str, problem: str) -> ScenarioError:
        line = self.line_of(key_path) if key_path and len(key_path) <= MAX_LINE else None
        where = f"{self.path}:{line}" if line else self.path
        key_path = clip(key_path, MAX_LINE // 4)
        message = f"{where}: {key_path}: {problem}" if key_path else f"{where}: {problem}"
        return ScenarioError(clip(printable(message), MAX_LINE))


def printable(text: str) -> str:
    """The message on one line: control and line-breaking characters (as in a hostile key) escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def clip(text: str, limit: int) -> str:
    """``text``, or its first characters, an ellipsis and its length when it is longer than ``limit``."""
    if len(text) <= limit:
        return text
    return f"{text[: max(0, limit - 3)]}... ({len(text):,} characters)"


def describe(value: Any) -> str:
    """A value as echoed in a message: its repr, cut to ``ECHO`` characters with the original size."""
    text = repr(value)
    if len(text) <= ECHO:
        return text
    if isinstance(value, (list, dict)):
        size = f"{len(value):,} items"
    else:
        size = f"{len(value if isinstance(value, str) else text):,} characters"
    return f"{text[: ECHO - 3]}... ({size})"


def listing(names: Any, limit: int = 10) -> str:
    """Names for "expected one of: ...", each echoed, the first ``limit`` of them and how many in all."""
    names = [n if len(n) <= ECHO else describe(n) for n in names]
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown}, ... ({len(names):,} in all)"


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
            raise self.ctx.error(self.path or key, f"missing key {describe(key)}")
        return default

    def int(
        self,
        key: str,
        default: Any = MISSING,
        minimum: int = 0,
        what: str = "a whole number",
        maximum: int = INT64[1],
    ) -> Any:
        value = self.raw(key, default)
        if value is default and default is not MISSING:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected {what} >= {minimum}, got {describe(value)}")
        if value < minimum:
            raise self.error(key, f"expected {what} >= {minimum}, got {value}")
        if value > maximum:
            raise self.error(key, f"expected {what} from {minimum} to {maximum}, got {value}")
        return value

    def ms(self, key: str, default: Any = MISSING) -> Any:
        return self.int(key, default, 0, "a whole number of ms", MAX_MS)

    def str(self, key: str, default: Any = MISSING, choices: tuple[str, ...] | None = None) -> Any:
        value = self.raw(key, default)
        if value is default and default is not MISSING:
            return value
        if not isinstance(value, str) or not value:
            raise self.error(key, f"expected a non-empty string, got {describe(value)}")
        if choices is not None and value not in choices:
            raise self.error(key, f"expected one of {', '.join(choices)}, got {describe(value)}")
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
            expected = listing(sorted(allowed or self.used), 40)
            raise self.error(unknown[0], f"unknown key {describe(unknown[0])}; expected one of: {expected}")


def read_document(path: str | Path) -> str:
    """The text of a scenario-like file; a missing, unreadable, huge or non-UTF-8 one is a ScenarioError."""
    try:
        with Path(path).open("rb") as file:
            data = file.read(MAX_DOCUMENT_BYTES + 1)
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such file") from None
    except OSError as error:
        raise ScenarioError(f"{path}: cannot read the file: {error.strerror or error}") from None
    if len(data) > MAX_DOCUMENT_BYTES:
        raise ScenarioError(
            f"{path}: the file is larger than {MAX_DOCUMENT_BYTES:,} bytes; expected a scenario"
        )
    try:
        return data.decode("utf-8-sig")  # a byte-order mark (as some editors write) is dropped
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        byte = data[error.start]
        raise ScenarioError(
            f"{path}:{line}: not UTF-8: byte 0x{byte:02x} at column {column}; expected a UTF-8 text file"
        ) from None


_TOML_WHERE = re.compile(r"\s*\((?:at line (\d+), column (\d+)|at end of document)\)$")
_TOKENS = re.compile(
    r'"""(?:[^\\]|\\.)*?"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*|[\[\]{}]', re.S
)


def parse_document(text: str, path: str) -> Table:
    """The TOML root table of a scenario-like file, ready for checked reading."""
    text = text.removeprefix("\ufeff")
    if len(text) > MAX_DOCUMENT_BYTES:
        raise ScenarioError(
            f"{path}: the document is larger than {MAX_DOCUMENT_BYTES:,} characters; expected a scenario"
        )
    lines = text.count("\n") + 1
    deep = _too_deep(text)
    if deep is not None:
        raise ScenarioError(
            f"{path}:{deep}: tables and arrays nested more than {MAX_NESTING} deep; "
            "expected a flatter document"
        )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        reason = str(error)
        match = _TOML_WHERE.search(reason)
        where, column = path, ""
        if match:
            reason = reason[: match.start()]
            where = f"{path}:{match.group(1) or lines}"
            column = f" (column {match.group(2)})" if match.group(2) else " (at the end)"
        raise ScenarioError(printable(f"{where}: malformed TOML: {clip(reason, 200)}{column}")) from None
    except ValueError:  # Python refuses to convert an integer of more than 4300 digits
        digits = re.search(r"[0-9_]{4000,}", text)
        line = text.count("\n", 0, digits.start()) + 1 if digits else None
        where = f"{path}:{line}" if line else path
        raise ScenarioError(
            f"{where}: expected a whole number that fits in 64 bits, got one of thousands of digits"
        ) from None
    except RecursionError:  # a backstop: _too_deep should have refused it
        raise ScenarioError(
            f"{path}: tables and arrays nested too deeply; expected a flatter document"
        ) from None
    ctx = Context(path, text)
    big = _huge_integers(data)
    if big:
        raise ScenarioError(
            *(
                ctx.error(
                    key, f"expected a whole number that fits in 64 bits, got {describe(value)}"
                ).problems[0]
                for key, value in big
            )
        )
    return Table(data, "", ctx)


def _too_deep(text: str) -> int | None:
    """The line where brackets and braces (outside strings and comments) nest past MAX_NESTING."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return None
    depth = 0
    for token in _TOKENS.finditer(text):
        mark = token.group()
        if mark in ("[", "{"):
            depth += 1
            if depth > MAX_NESTING:
                return text.count("\n", 0, token.start()) + 1
        elif mark in ("]", "}"):
            depth = max(0, depth - 1)
    return None


def _huge_integers(data: dict) -> list[tuple[str, int]]:
    """(key path, value) of integers outside 64 bits (the first 20 found)."""
    found: list[tuple[str, int]] = []
    low, high = INT64
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    while stack and len(found) < 20:
        path, value = stack.pop()
        items = enumerate(value) if isinstance(value, list) else value.items()
        nested = []
        for key, item in items:
            if type(item) is int and not low <= item <= high:
                found.append((_key_path((*path, key)), item))
            elif isinstance(item, (dict, list)):
                nested.append(((*path, key), item))
        stack.extend(reversed(nested))
    return found


def _key_path(keys: tuple[str | int, ...]) -> str:
    """``steps[3].bytes`` from ("steps", 3, "bytes")."""
    text = ""
    for key in keys:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else key)
    return text
