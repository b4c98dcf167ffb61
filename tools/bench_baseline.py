"""Time this tree against an earlier commit in one run: alternating pairs of the same command.

This machine's speed drifts by a third within minutes, so a figure from an earlier
session does not compare with one from now. ``pairs`` runs a command from a
baseline commit and from this tree one after the other, the order swapped every
pair, so both see the same spells; ``summary`` gives this tree ÷ baseline.

``checkout(rev, root, into)`` writes the commit's files (``git archive``) to a
directory: the baseline runs from there with the same interpreter and packages.

Every benchmark in tools/ shares ``--baseline REV --pairs N`` through this module::

    FIGURES = [Figure("runs_per_cpu_minute", "higher"), Figure("workloads.*.kafka_vs_heap", "lower")]
    parser = argparse.ArgumentParser(...)
    add_arguments(parser)
    args = parser.parse_args(argv)
    commit = check(parser, args)          # one-line error, before any work
    if commit is not None:
        return compare_tool(__file__, argv, FIGURES, commit, args.pairs, args.json, args.baseline)

``compare_tool`` runs the tool's own command with ``--json`` from the commit's files and
from this tree, ``pairs`` times in alternating order, and reports per figure this tree ÷
baseline, total against total, with the pairs' lowest and highest ratio; the whole
command's wall seconds (``command_s``) are compared too when both sides printed JSON. A
figure is a dotted path into the tool's JSON document: ``*`` takes every key of an object;
``[a,b]`` takes every element of a list of objects, named ``a=..,b=..`` by those fields.
Paths expand on this tree's document; a figure the baseline's document lacks (or a
baseline whose tool has no ``--json``) is named in one line and left out.

A tool whose workload is its own client code (``wire_bench``: real Kafka clients against
``minibroker serve``) passes ``same_tool=True``: both sides then run *this tree's* tool script,
with the baseline's package first on the path (``TREE`` in the environment names the tree the
tool imports minibroker from), so a workload option added since REV measures REV's server too.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MAX_PAIRS = 50
#: the whole command's wall seconds, compared for every tool
COMMAND_S = "command_s"
#: the environment variable naming the tree a ``same_tool`` run imports minibroker from
TREE = "MINIBROKER_BENCH_TREE"


def package_root(default: Path) -> Path:
    """The tree a tool imports minibroker from: ``$MINIBROKER_BENCH_TREE`` (set by a ``same_tool``
    run) or ``default`` (the tool's own tree)."""
    named = os.environ.get(TREE)
    return Path(named) if named else default


class BaselineError(Exception):
    """The baseline cannot be used; ``str()`` is the one-line reason."""


def resolve(rev: str, root: Path) -> str:
    """The full commit id ``rev`` names in the git checkout at ``root``."""
    try:
        found = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
            capture_output=True,
            text=True,
        )
    except OSError as error:
        raise BaselineError(f"--baseline needs git: {error.strerror}") from None
    if found.returncode != 0:
        raise BaselineError(f"--baseline {rev}: not a commit of the git checkout at {root}")
    return found.stdout.strip()


def checkout(commit: str, root: Path, into: Path) -> Path:
    """The files of ``commit`` written under ``into`` (created); returns ``into``."""
    archive = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", commit], capture_output=True)
    if archive.returncode != 0:
        reason = archive.stderr.decode(errors="replace").strip().splitlines()
        raise BaselineError(f"--baseline {commit[:12]}: git archive failed: {(reason or ['?'])[-1]}")
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def alternate(count: int, run: Callable[[str], Any]) -> list[dict[str, Any]]:
    """``count`` pairs of ``run("baseline")`` and ``run("current")``, the order swapped every pair
    (baseline first in the first): ``{"baseline": .., "current": .., "order": [first, second]}``."""
    done = []
    for index in range(count):
        order = ("baseline", "current") if index % 2 == 0 else ("current", "baseline")
        found = {side: run(side) for side in order}
        done.append({"baseline": found["baseline"], "current": found["current"], "order": list(order)})
    return done


def pairs(count: int, run: Callable[[str], float]) -> list[dict[str, float]]:
    """``count`` pairs of ``run("baseline")`` and ``run("current")`` (seconds each), the order
    swapped every pair (baseline first in the first)."""
    return [
        {
            "baseline_s": pair["baseline"],
            "current_s": pair["current"],
            "ratio": round(pair["current"] / pair["baseline"], 3),
        }
        for pair in alternate(count, run)
    ]


def summary(done: list[dict[str, float]]) -> dict[str, Any]:
    """This tree ÷ baseline over all pairs (total against total), and the pairs' lowest and highest."""
    ratios = [pair["ratio"] for pair in done]
    baseline = sum(pair["baseline_s"] for pair in done)
    current = sum(pair["current_s"] for pair in done)
    return {
        "baseline_total_s": round(baseline, 2),
        "current_total_s": round(current, 2),
        "ratio": round(current / baseline, 3),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
    }


# --- figures: dotted paths into a tool's JSON document ----------------------------------------


@dataclass(frozen=True)
class Figure:
    """One compared figure: a dotted ``path`` into the tool's JSON and which way is better."""

    path: str
    better: str = "lower"  # "lower" or "higher"

    def __post_init__(self) -> None:
        if self.better not in ("lower", "higher"):
            raise ValueError(f"Figure {self.path}: better must be 'lower' or 'higher', got {self.better!r}")


def _segments(path: str) -> list[str]:
    """``a.[x,y].b`` -> ``["a", "[x,y]", "b"]`` (a bracketed segment may hold dots in values)."""
    out, part, depth = [], "", 0
    for char in path:
        if char == "." and depth == 0:
            out.append(part)
            part = ""
            continue
        depth += {"[": 1, "]": -1}.get(char, 0)
        part += char
    return [*out, part]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def expand(document: Any, path: str) -> Iterator[tuple[tuple[str, ...], float]]:
    """Every ``(concrete segments, number)`` that ``path`` names in ``document``."""

    def walk(node: Any, rest: list[str], done: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], float]]:
        if not rest:
            if _number(node):
                yield done, node
            return
        head, tail = rest[0], rest[1:]
        if head == "*" and isinstance(node, dict):
            for key, value in node.items():
                yield from walk(value, tail, (*done, str(key)))
        elif head.startswith("[") and head.endswith("]") and isinstance(node, list):
            fields = [f.strip() for f in head[1:-1].split(",")]
            for element in node:
                if isinstance(element, dict) and all(f in element for f in fields):
                    name = ",".join(f"{f}={element[f]}" for f in fields)
                    yield from walk(element, tail, (*done, name))
        elif isinstance(node, dict) and head in node:
            yield from walk(node[head], tail, (*done, head))

    yield from walk(document, _segments(path), ())


def _matches(element: Any, wanted: dict[str, str]) -> bool:
    return isinstance(element, dict) and all(str(element.get(k)) == v for k, v in wanted.items())


def lookup(document: Any, concrete: tuple[str, ...]) -> float | None:
    """The number at concrete segments (as ``expand`` gives them) in ``document``, or None."""
    node = document
    for segment in concrete:
        if isinstance(node, dict) and segment in node:
            node = node[segment]
        elif isinstance(node, list) and "=" in segment:
            wanted = dict(part.split("=", 1) for part in segment.split(","))
            node = next((e for e in node if _matches(e, wanted)), None)
            if node is None:
                return None
        else:
            return None
    return node if _number(node) else None


def compared(
    done: list[dict[str, Any]], figures: list[Figure]
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Per concrete figure of ``done`` (pairs of ``{"baseline": doc|None, "current": doc}``):
    this tree ÷ baseline total against total, the pairs' lowest and highest; and the figures the
    baseline lacks (path names, once each)."""
    out: dict[str, dict[str, Any]] = {}
    missing: list[str] = []
    for figure in figures:
        concrete = dict.fromkeys(found for pair in done for found, _ in expand(pair["current"], figure.path))
        for segments in concrete:
            name = ".".join(segments)
            values = [(lookup(p["baseline"], segments), lookup(p["current"], segments)) for p in done]
            if any(b is None for b, _ in values):
                missing.append(name)
                continue
            if any(c is None for _, c in values):
                continue  # this tree measured it in some pairs only: no total to compare
            ratios = [round(c / b, 3) for b, c in values if b]
            baseline, current = sum(b for b, _ in values), sum(c for _, c in values)
            out[name] = {
                "better": figure.better,
                "baseline_total": round(baseline, 6),
                "current_total": round(current, 6),
                "ratio": round(current / baseline, 3) if baseline else None,
                "ratio_min": min(ratios) if ratios else None,
                "ratio_max": max(ratios) if ratios else None,
                "pairs": [[b, c] for b, c in values],
            }
    return out, missing


# --- the shared command line -------------------------------------------------------------------


def add_arguments(parser: Any) -> None:
    """``--baseline REV`` and ``--pairs N`` on a tool's parser."""
    parser.add_argument(
        "--baseline", metavar="REV", help="run this tool from commit REV and this tree in alternating pairs"
    )
    parser.add_argument(
        "--pairs", type=int, default=3, help=f"pairs with --baseline, 1 to {MAX_PAIRS} (default 3)"
    )


def check(parser: Any, args: Any, root: Path = ROOT) -> str | None:
    """The baseline's full commit id (None without ``--baseline``); a one-line error and exit 2
    for ``--pairs`` outside 1..50 or a REV that names no commit."""
    if not 1 <= args.pairs <= MAX_PAIRS:
        parser.exit(2, f"{parser.prog}: error: --pairs must be 1 to {MAX_PAIRS}, got {args.pairs}\n")
    if args.baseline is None:
        return None
    try:
        return resolve(args.baseline, root)
    except BaselineError as error:
        parser.exit(2, f"{Path(parser.prog).stem}: {error}\n")
    return None  # unreachable: parser.exit raises


def _ours(arg: str) -> bool:
    """``arg`` is ``--baseline`` or ``--pairs``, or an abbreviation argparse took for one of them
    (every tool has both, so any other option they abbreviate would have been ambiguous)."""
    name = arg.split("=", 1)[0]
    if len(name) <= 2 or not name.startswith("--"):
        return False
    return "--baseline".startswith(name) or "--pairs".startswith(name)


def forwarded(argv: list[str]) -> list[str]:
    """The tool's arguments without ``--baseline``/``--pairs``, with ``--json``."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if _ours(arg):
            skip = "=" not in arg
            continue
        out.append(arg)
    return out if "--json" in out else [*out, "--json"]


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def nproc() -> int:
    """The CPUs this process may run on (what ``nproc`` prints)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def run_side(
    tree: Path, script: str, args: list[str], label: str, tool_tree: Path | None = None
) -> dict[str, Any]:
    """``python tree/script args`` from the caller's directory with ``tree`` first on the path (the
    script from ``tool_tree`` instead when given): wall seconds, and the JSON document it printed
    (None with the one-line reason if none)."""
    path = (tool_tree or tree) / script
    if not path.is_file():
        return {"seconds": None, "document": None, "reason": f"{label} has no {script}"}
    environment = {**os.environ, "PYTHONPATH": str(tree), TREE: str(tree)}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, env=environment)
    seconds = round(time.perf_counter() - started, 3)
    try:
        document = json.loads(done.stdout)
    except ValueError:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        if "unrecognized arguments" in last and "--json" in last:
            reason = f"{label}'s {script} has no --json"
        else:
            reason = f"{label}'s {script} printed no JSON (exit {done.returncode}): {last[:200]}"
        return {"seconds": seconds, "document": None, "reason": reason}
    return {"seconds": seconds, "document": document, "reason": None}


def measure(
    commit: str,
    script: str,
    args: list[str],
    figures: list[Figure],
    count: int,
    root: Path = ROOT,
    rev: str | None = None,
    same_tool: bool = False,
) -> dict[str, Any]:
    """The tool ``script`` (a path under the tree, e.g. ``tools/chaos_bench.py``) with ``args``,
    from ``commit``'s files and from ``root``, in ``count`` alternating pairs: the ``baseline``
    section of the tool's JSON, and this tree's last document under ``"document"``. With
    ``same_tool`` both sides run ``root``'s script, each against its own tree's package."""
    label = f"baseline {commit[:12]}"
    before = _load()
    tool_tree = root if same_tool else None
    with tempfile.TemporaryDirectory(prefix="minibroker-baseline-") as scratch:
        trees = {"baseline": checkout(commit, root, Path(scratch) / "tree"), "current": root}
        names = {"baseline": label, "current": "this tree"}
        done = alternate(count, lambda side: run_side(trees[side], script, args, names[side], tool_tree))
    after = _load()
    for pair in done:
        if pair["current"]["document"] is None:
            raise BaselineError(pair["current"]["reason"])
    documents = [{"baseline": p["baseline"]["document"], "current": p["current"]["document"]} for p in done]
    for pair, docs in zip(done, documents, strict=True):
        for side in ("baseline", "current"):
            # a run that printed no JSON failed: its seconds are not the tool's
            seconds = pair[side]["seconds"] if docs[side] is not None else None
            docs[side] = {COMMAND_S: seconds, "tool": docs[side]}
    wrapped = [Figure(COMMAND_S, "lower"), *(Figure(f"tool.{f.path}", f.better) for f in figures)]
    found, lacking = compared(documents, wrapped)
    reason = next((p["baseline"]["reason"] for p in done if p["baseline"]["reason"]), None)
    missing = [
        f"{label}: {name.removeprefix('tool.')} not compared ({reason or 'not in its --json output'})"
        for name in lacking
    ]
    return {
        "document": documents[-1]["current"]["tool"],
        "baseline": {
            "rev": rev or commit,
            "commit": commit,
            "command": shlex.join(["python", script, *args]),
            "same_tool": same_tool,
            "pairs": count,
            "order": [p["order"] for p in done],
            "cpus": nproc(),
            "load_average_before": before,
            "load_average_after": after,
            "figures": {name.removeprefix("tool."): value for name, value in found.items()},
            "missing": missing,
        },
    }


def compare_tool(
    tool_file: str,
    argv: list[str] | None,
    figures: list[Figure],
    commit: str,
    count: int,
    as_json: bool,
    rev: str | None = None,
    same_tool: bool = False,
) -> int:
    """Run the tool at ``tool_file`` against ``commit`` (``measure``) and print the result: with
    ``as_json`` this tree's document with a ``baseline`` key (a list document goes under ``rows``),
    else one line per figure. Exit status 0, or 1 with a one-line reason if this tree's run failed."""
    name = Path(tool_file).stem
    script = f"tools/{Path(tool_file).name}"
    args = forwarded(sys.argv[1:] if argv is None else list(argv))
    try:
        found = measure(commit, script, args, figures, count, rev=rev, same_tool=same_tool)
    except BaselineError as error:
        print(f"{name}: {error}", file=sys.stderr)
        return 1
    baseline = found["baseline"]
    if as_json:
        document = found["document"]
        document = {**document} if isinstance(document, dict) else {"rows": document}
        document["baseline"] = baseline
        print(json.dumps(document, indent=2))
        return 0
    print_baseline(baseline)
    return 0


def print_baseline(baseline: dict[str, Any]) -> None:
    """The baseline section as text: one line per figure, the missing ones, the machine's load."""
    print(
        f"this tree ÷ {baseline['rev']} ({baseline['commit'][:12]}), {baseline['pairs']} alternating "
        f"pairs of `{baseline['command']}`:"
    )
    width = max([len(n) for n in baseline["figures"]] + [6])
    print(f"{'figure':<{width}} {'better':>6} {'baseline':>14} {'this tree':>14} {'ratio':>7} {'pairs':>15}")
    for figure, f in baseline["figures"].items():
        spread = "" if f["ratio_min"] is None else f"{f['ratio_min']:.3f}–{f['ratio_max']:.3f}"
        ratio = "-" if f["ratio"] is None else f"{f['ratio']:.3f}"
        print(
            f"{figure:<{width}} {f['better']:>6} {f['baseline_total']:>14.6g} {f['current_total']:>14.6g} "
            f"{ratio:>7} {spread:>15}"
        )
    for line in baseline["missing"]:
        print(line)
    print(
        f"load average before {baseline['load_average_before']}, after {baseline['load_average_after']}, "
        f"nproc {baseline['cpus']}"
    )
