"""Runs the fenced code blocks of README.md and docs/*.md, so that no example can go stale.

The convention the documents follow:

- ```` ```console ````: a line starting with ``$ `` is a command, run from the repository root without a
  shell (split with :func:`shlex.split`; leading ``NAME=value`` words set the environment; a line ending
  in a backslash continues on the next one). ``minibroker`` is this tree's command
  (``python -m minibroker`` with ``PYTHONPATH`` at the root), any other program runs as itself, found
  first among the test interpreter's scripts. The lines after a command, up to the next ``$ ``, are its
  expected stdout; a last line ``[exit N]`` says it exits with N (otherwise 0).
- ```` ```python ````: run as a script in an empty temporary directory; it must exit 0. An
  ```` ```output ```` block right after it (blank lines between allowed) is its expected stdout. A block
  that defines ``def test_`` is a test file instead, run by pytest, which must pass.
- every other fence (sh, toml, text, json, untagged...) is shown, never run.

Output is compared line by line after stripping each line's trailing spaces and the trailing blank
lines; an expected line that is exactly ``...`` stands for any number of lines (none included).
Every command runs with CI=true, no stdin, COLUMNS=120 (the width ``minibroker run`` draws its tables
with when stdout is not a terminal) and NO_COLOR, for at most 60 s.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 60
WILDCARD = "..."
EXIT_LINE = re.compile(r"\[exit (\d+)\]")
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_SHELL_WORDS = {"|", "||", "&&", ";", ">", ">>", "<", "2>", "2>&1", "&"}


@dataclass
class Block:
    """One fenced code block: where it opens (``file:line``), its language and its text."""

    path: Path
    line: int
    lang: str
    text: str
    #: the ``output`` block that follows a python block, if any
    output: str | None = None

    @property
    def id(self) -> str:
        try:
            name = self.path.resolve().relative_to(ROOT).as_posix()
        except ValueError:
            name = self.path.name
        return f"{name}:{self.line}"

    @property
    def runnable(self) -> bool:
        return self.lang in ("console", "python")


@dataclass
class Command:
    """One ``$ `` line of a console block, with the stdout and exit status it promises."""

    line: int
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    expected: list[str] = field(default_factory=list)
    exit_code: int = 0


class ExampleError(AssertionError):
    """An example whose run does not match what its document shows."""


# --- reading -------------------------------------------------------------------------------------
def blocks(path: Path) -> list[Block]:
    """Every fenced block of a markdown file, in order; an ``output`` block joins its python block."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    previous_end: int | None = None  # the closing line of the previous block
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None or (opening["fence"][0] == "`" and "`" in opening["info"]):
            index += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        lang = opening["info"].strip().split(" ")[0].lower() if opening["info"].strip() else ""
        body: list[str] = []
        close = index + 1
        while close < len(lines):
            closing = _FENCE.match(lines[close])
            if (
                closing is not None
                and closing["fence"][0] == fence[0]
                and len(closing["fence"]) >= len(fence)
                and not closing["info"].strip()
            ):
                break
            text = lines[close]
            body.append(text[min(indent, len(text) - len(text.lstrip(" "))) :])
            close += 1
        block = Block(path, index + 1, lang, "\n".join(body) + "\n" if body else "")
        between = lines[previous_end + 1 : index] if previous_end is not None else None
        if lang == "output" and found and found[-1].lang == "python" and not any(s.strip() for s in between):
            found[-1].output = block.text
        found.append(block)
        previous_end = close
        index = close + 1
    return found


def commands(block: Block) -> list[Command]:
    """The commands of a console block, each with its expected output and exit status."""
    result: list[Command] = []
    pending, start = "", 0  # a command continued by a trailing backslash, and its first line
    for offset, text in enumerate(block.text.splitlines()):
        if pending or text.startswith("$ "):
            if not pending:
                start = block.line + 1 + offset
            words = (pending + " " if pending else "") + (text if pending else text[2:])
            if words.endswith("\\"):
                pending = words[:-1].rstrip()
                continue
            pending = ""
            result.append(_command(block, start, words))
        elif result:
            result[-1].expected.append(text)
        elif text.strip():
            raise ExampleError(f"{block.id}: a console block starts with a `$ ` command, not {text!r}")
    if pending:
        raise ExampleError(f"{block.id}: the last command ends in a backslash")
    for command in result:
        lines = trimmed(command.expected)
        if lines and (status := EXIT_LINE.fullmatch(lines[-1].strip())):
            command.exit_code = int(status[1])
            lines = trimmed(lines[:-1])
        command.expected = lines
    return result


def _command(block: Block, line: int, words: str) -> Command:
    where = f"{block.id.rsplit(':', 1)[0]}:{line}"
    try:
        argv = shlex.split(words)
    except ValueError as error:
        raise ExampleError(f"{where}: cannot split {words!r}: {error}") from None
    env: dict[str, str] = {}
    while argv and _ASSIGNMENT.match(argv[0]):
        name, _, value = argv.pop(0).partition("=")
        env[name] = value
    if not argv:
        raise ExampleError(f"{where}: no command in {words!r}")
    if shell := [word for word in argv if word in _SHELL_WORDS]:
        raise ExampleError(f"{where}: console commands run without a shell; {shell[0]!r} is not supported")
    return Command(line, argv, env)


# --- comparing -----------------------------------------------------------------------------------
def trimmed(lines: list[str]) -> list[str]:
    """Each line without its trailing spaces, and no blank lines at the end."""
    result = [line.rstrip() for line in lines]
    while result and not result[-1]:
        result.pop()
    return result


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` is ``expected`` with every ``...`` line standing for zero or more lines."""
    expected, actual = trimmed(expected), trimmed(actual)
    # positions in ``expected`` reachable after consuming a prefix of ``actual`` (a small NFA)
    states = _closure({0}, expected)
    for line in actual:
        step = set()
        for state in states:
            if state < len(expected):
                if expected[state] == WILDCARD:
                    step.add(state)
                elif expected[state] == line:
                    step.add(state + 1)
        states = _closure(step, expected)
        if not states:
            return False
    return len(expected) in states


def _closure(states: set[int], expected: list[str]) -> set[int]:
    result = set(states)
    for state in sorted(states):
        while state < len(expected) and expected[state] == WILDCARD:
            state += 1
            result.add(state)
    return result


def difference(expected: list[str], actual: list[str]) -> str:
    import difflib

    lines = difflib.unified_diff(trimmed(expected), trimmed(actual), "document", "run", lineterm="")
    return "\n".join(lines)


# --- running -------------------------------------------------------------------------------------
def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every example runs in: deterministic output, this tree's code first."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "PYTEST_ADDOPTS")
        and not key.startswith("PYTEST_")
    }
    scripts = str(Path(sys.executable).parent)
    env.update(
        CI="true",
        COLUMNS="120",
        LINES="40",
        NO_COLOR="1",
        TERM="dumb",
        PYTHONPATH=str(ROOT),
        PATH=scripts + os.pathsep + env.get("PATH", ""),
    )
    env.update(extra or {})
    return env


def _run(argv: list[str], cwd: Path, env: dict[str, str], where: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise ExampleError(f"{where}: {shlex.join(argv)} ran longer than {TIMEOUT_S} s") from None
    except FileNotFoundError:
        raise ExampleError(f"{where}: no program {argv[0]!r}") from None


def _check(where: str, run: subprocess.CompletedProcess, expected: list[str] | None, exit_code: int) -> None:
    shown = f"{where}: {shlex.join(run.args)}"
    if run.returncode != exit_code:
        raise ExampleError(
            f"{shown} exited {run.returncode}, the document says {exit_code}\n"
            f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
        )
    if expected is not None and not matches(expected, run.stdout.splitlines()):
        raise ExampleError(
            f"{shown}: stdout differs from the document\n"
            f"{difference(expected, run.stdout.splitlines())}\nstderr:\n{run.stderr}"
        )


def run_console(block: Block) -> None:
    for command in commands(block):
        argv = command.argv
        if argv[0] == "minibroker":
            argv = [sys.executable, "-m", "minibroker", *argv[1:]]
        where = f"{block.id.rsplit(':', 1)[0]}:{command.line}"
        run = _run(argv, ROOT, environment(command.env), where)
        _check(where, run, command.expected, command.exit_code)


def run_python(block: Block, tmp: Path) -> None:
    if re.search(r"^\s*(async\s+)?def test_", block.text, re.MULTILINE):
        script = tmp / "test_example.py"
        script.write_text(block.text, encoding="utf-8")
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", script.name]
        _check(block.id, _run(argv, tmp, environment(), block.id), None, 0)
        return
    script = tmp / "example.py"
    script.write_text(block.text, encoding="utf-8")
    run = _run([sys.executable, script.name], tmp, environment(), block.id)
    expected = None if block.output is None else block.output.splitlines()
    _check(block.id, run, expected, 0)


def run_block(block: Block, tmp: Path) -> None:
    """Run one block as its document says; raises :class:`ExampleError` on any difference."""
    if block.lang == "console":
        run_console(block)
    elif block.lang == "python":
        run_python(block, tmp)
