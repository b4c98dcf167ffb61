"""Every chaos command the README and docs/chaos.md show runs as shown, with its exact arguments.

The examples are ``sh`` blocks (not run by tests/test_doc_examples.py, which runs ``console``
blocks): each line ``minibroker chaos ...`` or ``minibroker run chaos-...`` of them runs here, in
order, in one temporary directory (a later example reads what an earlier one wrote), and must exit
as its comment says (``exit N``; otherwise 0). Chaos runs are pure functions of their arguments, so
the shrunk file an example names is the one the example before it writes.
"""

from __future__ import annotations

import re
import shlex
import time
from pathlib import Path

from minibroker.cli import main
from tests.docblocks import ROOT

DOCS = (ROOT / "README.md", ROOT / "docs" / "chaos.md")
EXIT = re.compile(r"\bexit (\d+)\b")
#: a hang guard for all the examples together (they take about a minute of two CPUs)
BOUND_S = 900


def chaos_examples(path: Path) -> list[tuple[list[str], int]]:
    """(arguments after ``minibroker``, expected exit status) of each chaos example line of ``path``."""
    examples = []
    block = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            block = line == "```sh" and not block
            continue
        if not block:
            continue
        command, _, comment = line.partition("#")
        words = shlex.split(command)
        chaos = words[:2] == ["minibroker", "chaos"]
        replay = words[:2] == ["minibroker", "run"] and words[2].startswith("chaos-")
        if chaos or replay:
            found = EXIT.search(comment)
            examples.append((words[1:], int(found.group(1)) if found else 0))
    return examples


EXAMPLES = [example for path in DOCS for example in chaos_examples(path)]


def test_the_docs_show_chaos_examples():
    commands = [" ".join(args) for args, _ in EXAMPLES]
    assert "chaos --runs 20 --profile unclean --out chaos-unclean" in commands
    assert ("run chaos-unclean/shrunk/unclean-s0-r2.toml", 1) in [(" ".join(a), c) for a, c in EXAMPLES]


def test_every_chaos_example_runs_as_shown(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    for args, status in EXAMPLES:
        assert main(args) == status, (args, capsys.readouterr().err[-2000:])
        capsys.readouterr()
    assert time.monotonic() - started < BOUND_S
    report = (tmp_path / "chaos-unclean" / "chaos.md").read_text()
    assert "| runs with violations | 0 |" in report
    assert "(expected: the unclean election at" in report  # the group offsets its truncations moved
