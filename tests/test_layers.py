"""The layers of docs/architecture.md: imports point downward only, and the timer and purgatory stay pure."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "minibroker"
#: package -> rank; a module may import minibroker packages of a lower rank, of its own rank, the trace and
#: ``extras`` (standard library only) (packages not listed here, e.g. ones added later, are not checked);
#: rank 4 is the emulated cluster
RANKS = {
    "timer": 1,
    "purgatory": 2,
    "runtime": 3,
    "common": 4,
    "broker": 4,
    "controller": 4,
    "coordinator": 4,
    "clients": 4,
    "sim": 4,
    "cluster": 4,
    "scenario": 5,
}
FRONT_ENDS = {"tui", "analytics", "server", "cli", "commands", "report", "demo", "cliutil", "__main__"}
#: what any front end may reuse: the live view's renderer, the run summary, the CLI's small helpers
SHARED = {"tui", "report", "cliutil"}
PURE = {"timer", "purgatory"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _package(path: Path) -> str:
    part = path.relative_to(ROOT).parts[0]
    return part.removesuffix(".py")


def test_imports_point_downward():
    wrong = []
    for path in ROOT.rglob("*.py"):
        mine = _package(path)
        for name in _imports(path):
            top = name.split(".")
            if mine in PURE and top[0] == "trio":
                wrong.append(f"{path.relative_to(ROOT)} imports trio")
            if top[0] != "minibroker" or len(top) < 2 or top[1] in (mine, "trace", "extras"):
                continue
            other = top[1]
            upward = mine in RANKS and other in RANKS and RANKS[other] > RANKS[mine]
            sideways = mine in FRONT_ENDS - {"cli", "__main__"} and other in FRONT_ENDS - SHARED
            if mine == "trace" or upward or sideways:
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not wrong, wrong
