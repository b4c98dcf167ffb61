"""The layers of docs/architecture.md, checked on the source alone (``ast``, nothing imported).

Every package and top-level module of ``minibroker`` has a rank (``LAYERS``); a module may import its own
package and packages of a lower or equal rank, never a higher one, whether the import runs when the module
loads, inside a function (a lazy import), under ``if TYPE_CHECKING:`` or through a module named in a string
(``importlib.import_module("minibroker.x")``). Front ends import each other only where ``FRONT_END_USES``
says so; nothing inside ``minibroker`` imports a deprecated alias. There is no cycle between modules
(strongly connected components of the import graph, lazy imports included; a ``TYPE_CHECKING`` import is
left out only when ``TYPE_ONLY`` lists it: two modules of one concept) and none between packages. The timer
and the purgatory import no trio.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "minibroker"
ARCHITECTURE = ROOT.parent / "docs" / "architecture.md"

#: rank, name and packages (or top-level modules) of each layer, lowest first; docs/architecture.md's table
#: lists the same (``test_architecture_table_lists_the_ranks``). ``__init__`` is ``minibroker`` itself.
LAYERS = (
    (1, "pure core", ("__init__", "timer", "purgatory", "trace", "extras")),
    (2, "shared protocol data", ("common",)),
    (3, "runtime", ("runtime",)),
    (4, "Kafka's server parts", ("broker", "controller", "coordinator")),
    (5, "clients", ("clients",)),
    (6, "sim", ("sim",)),
    (7, "services", ("delayed_messages", "retry")),
    (8, "scenario", ("scenario",)),
    (9, "front ends", ("server", "tui", "analytics", "chaos", "testing")),
    (9, "the command line", ("cli", "__main__", "commands", "report", "demo", "cliutil", "retry_service")),
    (9, "deprecated aliases", ("cluster", "delay", "_moved")),
)
RANKS = {unit: rank for rank, _, units in LAYERS for unit in units}
FRONT_END_RANK = 9
#: old import paths kept one release: only the aliases themselves may import them
DEPRECATED = frozenset({"cluster", "delay", "_moved"})
#: what a front end may import from another front end: module (a prefix: a package covers its modules) ->
#: the front ends allowed (``*``: all) and why
FRONT_END_USES = {
    "minibroker.tui.render": ("*", "the live view's renderer"),
    "minibroker.tui.state": ("*", "the frame the renderer draws"),
    "minibroker.tui.keys": ("*", "the live view's keys"),
    "minibroker.tui.app": ("*", "the live view itself, driven by `run --tui` and `serve --tui`"),
    "minibroker.cliutil": ("*", "the command line's small helpers"),
    "minibroker.report": ("*", "the run summary"),
    "minibroker.server.control": ("testing", "MiniCluster wraps the control API's handle"),
    "minibroker.server.serve": ("testing", "MiniCluster serves the wire protocol"),
    "minibroker.analytics.session": ("chaos", "chaos --master runs its runs as Spark tasks"),
    "minibroker.analytics.spark_checks": ("chaos", "the one-line error of a Spark that cannot start"),
    "minibroker.cli": ("__main__", "python -m minibroker"),
    "minibroker.demo": ("cli", "demo-timer"),
    "minibroker.commands": ("cli", "run, check, list"),
    "minibroker.tui.commands": ("cli", "snapshot"),
    "minibroker.analytics.commands": ("cli", "analyze, sweep"),
    "minibroker.server.commands": ("cli", "serve"),
    "minibroker.chaos.commands": ("cli", "chaos"),
    "minibroker.retry_service": ("cli", "retry-service"),
}
#: (importer, imported) under ``TYPE_CHECKING`` left out of the cycle search, with the reason: the two
#: modules are one concept. An entry that no longer matches an import fails, so the list stays small.
TYPE_ONLY = {
    ("minibroker.purgatory.operation", "minibroker.purgatory.purgatory"): (
        "an operation holds the purgatory that watches it; the purgatory holds its operations"
    ),
}
#: packages that stay pure data structures: no trio, no event loop
PURE = frozenset({"timer", "purgatory"})


@dataclass(frozen=True)
class Rules:
    """What ``check`` enforces; the real tree's by default, a synthetic one's in the self-tests."""

    ranks: dict[str, int] = field(default_factory=lambda: RANKS)
    front_end_rank: int = FRONT_END_RANK
    deprecated: frozenset[str] = DEPRECATED
    front_end_uses: dict[str, tuple[str, str]] = field(default_factory=lambda: FRONT_END_USES)
    type_only: dict[tuple[str, str], str] = field(default_factory=lambda: TYPE_ONLY)
    pure: frozenset[str] = PURE


@dataclass(frozen=True)
class Import:
    """One import of a minibroker module: where it is, what it names, and when it runs."""

    source: str  # importing module, dotted
    target: str  # imported module, dotted (the deepest module the name resolves to)
    where: str  # path:line
    text: str  # the statement
    kind: str  # "load" (when the module loads), "lazy" (inside a function) or "type" (TYPE_CHECKING)

    def __str__(self) -> str:
        lazy = {"load": "", "lazy": " (lazy)", "type": " (TYPE_CHECKING)"}[self.kind]
        return f"{self.where}: {self.text}{lazy}"


def _module_names(root: Path) -> dict[str, Path]:
    """Dotted name of every module under ``root`` (the package directory) -> its file."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def unit(module: str) -> str:
    """The package or top-level module ``module`` belongs to (``__init__`` for the root package)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(tree: ast.Module) -> Iterable[tuple[ast.AST, str]]:
    """Every import statement and string constant of ``tree``, with when it runs."""

    def visit(node: ast.AST, kind: str) -> Iterable[tuple[ast.AST, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for sub in child.body:
                    yield from visit_one(sub, "type")
                for sub in child.orelse:
                    yield from visit_one(sub, kind)
            else:
                yield from visit_one(child, kind)

    def visit_one(node: ast.AST, kind: str) -> Iterable[tuple[ast.AST, str]]:
        inner = "lazy" if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) else kind
        if isinstance(node, ast.Import | ast.ImportFrom | ast.Constant):
            yield node, kind
        yield from visit(node, "type" if kind == "type" else inner)

    yield from visit(tree, "load")


@cache
def imports(root: Path) -> tuple[tuple[str, ...], tuple[Import, ...]]:
    """The modules under ``root`` and every import between them (string-named ones as lazy imports)."""
    modules = _module_names(root)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    found = []
    for source, path in modules.items():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        where = path.relative_to(root.parent)
        package = source if path.name == "__init__.py" else source.rpartition(".")[0]
        for node, kind in _statements(ast.parse(text)):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            elif isinstance(node.value, str) and node.value in modules and node.value != root.name:
                names, kind = [node.value], "lazy" if kind == "load" else kind
            statement = lines[node.lineno - 1].strip()
            for name in dict.fromkeys(names):
                target = resolve(name) if name.split(".")[0] == root.name else None
                if target is not None and target != source:
                    found.append(Import(source, target, f"{where}:{node.lineno}", statement, kind))
    return tuple(modules), tuple(found)


def _components(nodes: Iterable[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _front_end_allowed(edge: Import, rules: Rules) -> bool:
    for module, (who, _) in rules.front_end_uses.items():
        if (edge.target == module or edge.target.startswith(module + ".")) and who in (
            "*",
            unit(edge.source),
        ):
            return True
    return False


def check(root: Path, rules: Rules | None = None) -> list[str]:
    """Every breach of the layer rules in the tree at ``root``, one line each naming file:line."""
    rules = rules or Rules()
    modules, edges = imports(root)
    problems = []
    for module in modules:
        if unit(module) not in rules.ranks:
            problems.append(f"{module}: {unit(module)!r} has no rank: place it in a layer (LAYERS)")
    used_type_only = set()
    graph: dict[str, set[str]] = {}
    packages: dict[str, set[str]] = {}
    for edge in edges:
        mine, theirs = unit(edge.source), unit(edge.target)
        if (edge.source, edge.target) in rules.type_only and edge.kind == "type":
            if mine != theirs:
                problems.append(f"{edge}: a TYPE_CHECKING exemption must stay inside one package")
            used_type_only.add((edge.source, edge.target))
        else:
            graph.setdefault(edge.source, set()).add(edge.target)
            if mine != theirs:
                packages.setdefault(mine, set()).add(theirs)
        if mine == theirs or mine not in rules.ranks or theirs not in rules.ranks:
            continue
        if theirs in rules.deprecated and mine not in rules.deprecated:
            problems.append(f"{edge}: imports the deprecated alias {theirs!r}")
        elif rules.ranks[theirs] > rules.ranks[mine]:
            problems.append(
                f"{edge}: upward import, {mine} (rank {rules.ranks[mine]}) -> {theirs} "
                f"(rank {rules.ranks[theirs]})"
            )
        elif (
            rules.ranks[mine] == rules.ranks[theirs] == rules.front_end_rank
            and mine not in rules.deprecated
            and not _front_end_allowed(edge, rules)
        ):
            problems.append(f"{edge}: front end {mine} imports front end {theirs} (not in FRONT_END_USES)")
    for pair in sorted(set(rules.type_only) - used_type_only):
        problems.append(f"TYPE_ONLY lists {pair[0]} -> {pair[1]}, which matches no TYPE_CHECKING import")
    by_pair = {}
    for edge in edges:
        by_pair.setdefault((edge.source, edge.target), edge)
    for component in _components(sorted(graph), graph):
        inside = set(component)
        links = [str(by_pair[(a, b)]) for a in component for b in sorted(graph.get(a, ())) if b in inside]
        problems.append(f"import cycle between {', '.join(component)}: " + "; ".join(links))
    for component in _components(sorted(packages), packages):
        first: dict[tuple[str, str], list[Import]] = {}
        for edge in edges:
            pair = (unit(edge.source), unit(edge.target))
            exempt = (edge.source, edge.target) in rules.type_only
            if pair[0] != pair[1] and set(pair) <= set(component) and not exempt:
                first.setdefault(pair, []).append(edge)
        links = [f"{a} -> {b}: {found[0]} ({len(found)} in all)" for (a, b), found in sorted(first.items())]
        problems.append(f"package cycle between {', '.join(component)}: " + "; ".join(links))
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] not in rules.pure:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(name.split(".")[0] == "trio" for name in names):
                problems.append(f"{path.relative_to(root.parent)}:{node.lineno}: a pure package imports trio")
    return problems


# --- the tree ----------------------------------------------------------------------------------------
def test_every_package_has_a_rank_and_imports_point_downward():
    problems = check(ROOT)
    assert not problems, "\n".join(problems)


def test_every_ranked_name_exists():
    modules, _ = imports(ROOT)
    present = {unit(module) for module in modules}
    assert set(RANKS) - present == set()


def test_architecture_table_lists_the_ranks():
    """docs/architecture.md's layer table names the same packages at the same ranks as ``LAYERS``."""
    listed: dict[str, int] = {}
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        row = re.match(r"^\| (\d+) [^|]*\| ([^|]*)\|", line)
        if row:
            for name in re.findall(r"`([\w.]+)`", row.group(2)):
                listed[name.removeprefix("minibroker.").removesuffix(".py")] = int(row.group(1))
    assert listed == RANKS


# --- the rules, on small synthetic trees ---------------------------------------------------------------
def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "minibroker"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


SMALL = Rules(
    ranks={"__init__": 1, "low": 1, "mid": 2, "a": 3, "b": 3, "tui": 3, "old": 3},
    front_end_rank=3,
    deprecated=frozenset({"old"}),
    front_end_uses={"minibroker.tui": ("*", "the renderer")},
    type_only={("minibroker.low.op", "minibroker.low.purg"): "one concept"},
    pure=frozenset({"low"}),
)
TYPE_CHECKING = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
CLEAN = {
    "low/__init__.py": "",
    "low/op.py": TYPE_CHECKING + "    from minibroker.low.purg import P\n",
    "low/purg.py": "from minibroker.low.op import Op\n",
    "mid/__init__.py": "from minibroker.low import op\n",
    "a/__init__.py": "from minibroker.mid import x\nfrom minibroker.tui import render\n",
    "tui/__init__.py": "",
    "tui/render.py": "import minibroker.low.purg\n",
    "old.py": "from minibroker.mid import x\n",
    "b.py": "",
}


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({}, []),
        ({"new.py": ""}, ["minibroker.new: 'new' has no rank"]),
        ({"low/up.py": "def f():\n    from minibroker.b import y\n"}, ["low/up.py:2: from minibroker.b"]),
        (
            {"low/up.py": TYPE_CHECKING + "    import minibroker.b\n"},
            ["low/up.py:3: import minibroker.b (TYPE_CHECKING): upward import, low (rank 1) -> b (rank 3)"],
        ),
        ({"low/up.py": "import importlib\nimportlib.import_module('minibroker.b')\n"}, ["upward import"]),
        (
            {"b.py": "from minibroker.a import thing\n"},
            ["b.py:1: from minibroker.a import thing: front end b"],
        ),
        (
            {"b.py": "from minibroker.old import thing\n"},
            ["b.py:1: from minibroker.old import thing: imports"],
        ),
        ({"low/trio_user.py": "import trio\n"}, ["low/trio_user.py:1: a pure package imports trio"]),
        (
            {
                "mid/one.py": "from minibroker.mid.two import y\n",
                "mid/two.py": "def f():\n    import minibroker.mid.one\n",
            },
            ["import cycle between minibroker.mid.one, minibroker.mid.two: minibroker/mid/one.py:1"],
        ),
        (
            {
                "mid/one.py": "from minibroker.mid.two import y\n",
                "mid/two.py": TYPE_CHECKING + "    from minibroker.mid.one import x\n",
            },
            ["import cycle between minibroker.mid.one, minibroker.mid.two"],
        ),
        (
            {
                "a/__init__.py": "from minibroker.tui import render\n",
                "tui/render.py": "from minibroker.a import z\n",
            },
            [
                "front end tui imports front end a",
                "import cycle between minibroker.a, minibroker.tui.render",
                "package cycle between a, tui: a -> tui: minibroker/a/__init__.py:1",
            ],
        ),
        (
            {"low/op.py": "", "low/purg.py": ""},
            ["TYPE_ONLY lists minibroker.low.op -> minibroker.low.purg, which matches no TYPE_CHECKING"],
        ),
        ({"mid/rel.py": "from .. import b\n"}, ["mid/rel.py:1: from .. import b: upward import"]),
    ],
)
def test_each_rule_fires_on_a_synthetic_tree(tmp_path, files, expected):
    problems = check(_tree(tmp_path, {**CLEAN, **files}), SMALL)
    assert len(problems) == len(expected), problems
    for wanted in expected:
        assert any(wanted in problem for problem in problems), (wanted, problems)
