"""Each command's ``--help`` and its docs page agree: the page's synopsis names only options the command has,
and the page documents every option the command has.

The synopsis is the line of a ``text`` block on the command's page that starts ``minibroker COMMAND``
(continuation lines included). A synopsis may stand for a group of options with a placeholder in capitals
(``[SPARK OPTIONS]``); the page must then name those options elsewhere (an options table, a paragraph).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from minibroker.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
#: the page that documents each command (the README's command table says the same)
PAGES = {
    "run": "docs/run.md",
    "check": "docs/run.md",
    "list": "docs/run.md",
    "demo-timer": "docs/demo-timer.md",
    "snapshot": "docs/tui.md",
    "serve": "docs/serve.md",
    "analyze": "docs/pipeline.md",
    "sweep": "docs/pipeline.md",
    "chaos": "docs/chaos.md",
    "retry-service": "docs/retry-service.md",
}
_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
_FENCE = re.compile(r"^(```+|~~~+)\s*(\S*)")


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def options(parser: argparse.ArgumentParser) -> set[str]:
    """Every long option of a command, ``--help`` aside."""
    return {s for a in parser._actions for s in a.option_strings if s.startswith("--") and s != "--help"}


def synopsis(markdown: str, command: str) -> str:
    """The synopsis of ``command`` in a page: its ``minibroker COMMAND`` line and the indented ones after."""
    kind, found = None, []
    for line in markdown.splitlines():
        fence = _FENCE.match(line)
        if fence and kind is None:
            kind = fence[2] or "text"
            continue
        if fence:
            kind = None
            if found:
                break
            continue
        if kind != "text":
            continue
        if found and line.startswith(" "):
            found.append(line)
        elif found:
            break
        elif line.startswith(f"minibroker {command} ") or line == f"minibroker {command}":
            found.append(line)
    return "\n".join(found)


def test_every_command_has_a_page():
    assert set(commands()) == set(PAGES)


@pytest.mark.parametrize("command", sorted(PAGES))
def test_the_synopsis_names_only_options_the_command_has(command):
    text = synopsis((ROOT / PAGES[command]).read_text(encoding="utf-8"), command)
    assert text, f"{PAGES[command]} has no synopsis of `minibroker {command}` in a text block"
    unknown = set(_OPTION.findall(text)) - options(commands()[command])
    assert not unknown, f"{PAGES[command]}: the synopsis of {command} names {sorted(unknown)}, which it lacks"


@pytest.mark.parametrize("command", sorted(PAGES))
def test_the_page_documents_every_option_of_the_command(command):
    page = (ROOT / PAGES[command]).read_text(encoding="utf-8")
    missing = options(commands()[command]) - set(_OPTION.findall(page))
    assert not missing, f"{PAGES[command]} never mentions {command}'s {sorted(missing)}"


def test_a_synopsis_is_read_from_a_text_block_with_its_continuation_lines():
    page = "```sh\nminibroker x --c\n```\n\n```text\nminibroker x [--a]\n    [--b B]\nnot it --d\n```\n"
    assert _OPTION.findall(synopsis(page, "x")) == ["--a", "--b"]
    assert synopsis("```sh\nminibroker x --c\n```\n", "x") == ""
