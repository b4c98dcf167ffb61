"""Load a TOML scenario into the model, rejecting anything it cannot make sense of.

Every problem becomes one line of a ``ScenarioError``, naming the file, the line when
it can be found, the key path (``steps[3].at``) and the expected form:

    scenarios/x.toml:41: steps[3].at: expected a whole number of ms >= 0, got -5

Each item of a section (a topic, a step, ...) is checked even when an earlier one has
a problem; a section that refers to one with a problem is not checked (its problems
would be echoes). ``limits`` bounds what a run may ask for, and ``budget`` refuses a
run projected to take more than a few minutes.

The loader is split by concept: ``document`` (TOML, line numbers, checked tables),
``scope`` (what is loaded so far and reference checks), ``cluster`` (cluster, topics,
links), ``clients``, ``groups`` (subscriptions, member steps), ``admin`` (the ``delete_records``
step), ``steps``, ``expectations`` and ``events`` (the trace events an expectation may name);
``delay`` and ``retry`` read the sections the bundled features register. It is the scenario
package's loader, named apart from the ``load`` step that generates a produce
load.

Extension points, each a one-line registration:

- a new top-level section: a reader ``(root, scope) -> None`` that stores its result
  on the ``Scope`` (add the field there and on ``Scenario``), listed in ``CORE_SECTIONS``
  after the sections it refers to, with their names (it is skipped while one of them
  has a problem), or a feature's ``Section`` (``minibroker.scenario.feature``); a reader
  reads array items with ``scope.items`` so that every item's problem is reported;
- a new step action: a parser in ``steps.STEPS``;
- a new kind of expectation: a parser in ``expectations.EXPECTATIONS``, or a feature's
  ``ExpectationKind``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from minibroker.scenario.feature import features
from minibroker.scenario.loader.budget import check_budget, check_topics
from minibroker.scenario.loader.clients import fix_acks, read_clients
from minibroker.scenario.loader.cluster import read_cluster, read_links, read_topics
from minibroker.scenario.loader.document import (
    ScenarioError,
    Table,
    describe,
    parse_document,
    read_document,
)
from minibroker.scenario.loader.expectations import CAUSES, COUNTS, ERRORS, read_expectations
from minibroker.scenario.loader.limits import MAX_PROBLEMS
from minibroker.scenario.loader.scope import Scope
from minibroker.scenario.loader.steps import STEP_ACTIONS, read_steps
from minibroker.scenario.model import Scenario

# the names the sweep file loader shares (it validates its overrides like a scenario)
_Table = Table
_describe = describe
_fix_acks = fix_acks

__all__ = [
    "CAUSES",
    "CORE_SECTIONS",
    "COUNTS",
    "ERRORS",
    "STEP_ACTIONS",
    "ScenarioError",
    "load_scenario",
    "parse_document",
    "parse_scenario",
    "read_document",
    "sections",
]


def read_meta(root: Table, scope: Scope) -> None:
    """``[scenario]``: name (default: the file's stem), description, seed, end_ms."""
    meta = root.table("scenario")
    scope.name = meta.str("name", Path(scope.ctx.path).stem)
    scope.description = meta.str("description", "")
    scope.seed = meta.int("seed", 0)
    scope.end_ms = meta.ms("end_ms", None)
    meta.finish()


#: the core top-level sections in the order they are read, each with the sections it refers to: a section
#: is not checked while one it refers to has a problem (its own would be echoes); the registered features'
#: sections (``minibroker.scenario.feature``) are read after ``topics``
CORE_SECTIONS: dict[str, tuple[Callable[[Table, Scope], None], tuple[str, ...]]] = {
    "scenario": (read_meta, ()),
    "cluster": (read_cluster, ()),
    "topics": (read_topics, ("cluster",)),
    "clients": (read_clients, ("topics",)),
    "links": (read_links, ("cluster", "clients")),
    "steps": (read_steps, ("cluster", "topics", "clients")),
    "expect": (read_expectations, ("cluster", "topics", "clients", "steps")),
}


def sections() -> dict[str, tuple[Callable[[Table, Scope], None], tuple[str, ...]]]:
    """Every top-level section in the order it is read: the core ones with the features' after ``topics``."""
    added = [section for feature in features() for section in feature.sections]
    ordered: dict[str, tuple[Callable[[Table, Scope], None], tuple[str, ...]]] = {}
    for name, (read, needs) in CORE_SECTIONS.items():
        referring = tuple(section.name for section in added if name in section.referenced_by)
        ordered[name] = (read, needs + referring)
        if name == "topics":
            ordered.update({section.name: (section.read, section.needs) for section in added})
    return ordered


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file."""
    return parse_scenario(read_document(path), str(path))


def parse_scenario(text: str, path: str = "<scenario>") -> Scenario:
    """Validate the text of a scenario; ``path`` names it in messages.

    Every problem is reported (up to ``MAX_PROBLEMS`` lines, then a count of the rest),
    each on its own line of the one ``ScenarioError``.
    """
    root = parse_document(text, path)
    scope = Scope(root.ctx)
    failed: set[str] = set()
    known = sections()
    for name, (read, needs) in known.items():
        if failed.intersection(needs):
            failed.add(name)
            root.used.add(name)  # known, only not checked
            continue
        before = len(scope.problems)
        try:
            read(root, scope)
        except ScenarioError as error:
            scope.problems.extend(error.problems)
        if len(scope.problems) > before:
            failed.add(name)
    try:
        root.finish(tuple(known))
    except ScenarioError as error:
        scope.problems.extend(error.problems)
    if not scope.problems:
        if not any(root.has(name) for name in known if name != "scenario"):
            scope.problems.append(
                f"{path}: an empty scenario; expected [cluster], [[topics]], [[clients]] and [[steps]]"
            )
        else:
            problem = check_topics(scope, path) or check_budget(scope, path)
            scope.problems.extend(filter(None, [problem]))
    if scope.problems:
        raise ScenarioError(*_capped(scope.problems))
    return Scenario(
        scope.name,
        scope.description,
        path,
        scope.seed,
        scope.end_ms,
        scope.cluster,
        scope.links,
        scope.topics,
        scope.clients,
        scope.steps,
        scope.expectations,
        scope.delay_service,
        scope.delay_wheel,
        scope.retry,
    )


def _capped(problems: list[str]) -> list[str]:
    if len(problems) <= MAX_PROBLEMS:
        return problems
    more = len(problems) - MAX_PROBLEMS
    return [*problems[:MAX_PROBLEMS], f"... and {more:,} more problem{'s' if more > 1 else ''}"]
