"""Load a TOML scenario into the model, rejecting anything it cannot make sense of.

Every problem becomes one ``ScenarioError`` whose message names the file, the
line when it can be found, the key path (``steps[3].at``) and the expected form:

    scenarios/x.toml:41: steps[3].at: expected a whole number of ms >= 0, got -5

The loader is split by concept: ``document`` (TOML, line numbers, checked tables),
``scope`` (what is loaded so far and reference checks), ``cluster`` (cluster, topics,
links), ``clients``, ``steps`` and ``expectations``.

Extension points, each a one-line registration:

- a new top-level section: a reader ``(root, scope) -> None`` that stores its result
  on the ``Scope`` (add the field there and on ``Scenario``), listed in ``SECTIONS``
  after the sections it refers to;
- a new step action: a parser in ``steps.STEPS``;
- a new kind of expectation: a parser in ``expectations.EXPECTATIONS``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from minibroker.scenario.load.clients import fix_acks, read_clients
from minibroker.scenario.load.cluster import read_cluster, read_links, read_topics
from minibroker.scenario.load.delay import read_delay_service, read_delay_wheel
from minibroker.scenario.load.document import (
    ScenarioError,
    Table,
    describe,
    parse_document,
    read_document,
)
from minibroker.scenario.load.expectations import CAUSES, COUNTS, ERRORS, read_expectations
from minibroker.scenario.load.scope import Scope
from minibroker.scenario.load.steps import STEP_ACTIONS, read_steps
from minibroker.scenario.model import Scenario

# the names the sweep file loader shares (it validates its overrides like a scenario)
_Table = Table
_describe = describe
_fix_acks = fix_acks

__all__ = [
    "CAUSES",
    "COUNTS",
    "ERRORS",
    "SECTIONS",
    "STEP_ACTIONS",
    "ScenarioError",
    "load_scenario",
    "parse_document",
    "parse_scenario",
    "read_document",
]


def read_meta(root: Table, scope: Scope) -> None:
    """``[scenario]``: name (default: the file's stem), description, seed, end_ms."""
    meta = root.table("scenario")
    scope.name = meta.str("name", Path(scope.ctx.path).stem)
    scope.description = meta.str("description", "")
    scope.seed = meta.int("seed", 0)
    scope.end_ms = meta.ms("end_ms", None)
    meta.finish()


#: the top-level sections, in the order they are read (a section may refer to those before it)
SECTIONS: dict[str, Callable[[Table, Scope], None]] = {
    "scenario": read_meta,
    "cluster": read_cluster,
    "topics": read_topics,
    "delay_service": read_delay_service,
    "delay_wheel": read_delay_wheel,
    "clients": read_clients,
    "links": read_links,
    "steps": read_steps,
    "expect": read_expectations,
}


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file."""
    return parse_scenario(read_document(path), str(path))


def parse_scenario(text: str, path: str = "<scenario>") -> Scenario:
    """Validate the text of a scenario; ``path`` names it in messages."""
    root = parse_document(text, path)
    scope = Scope(root.ctx)
    for read in SECTIONS.values():
        read(root, scope)
    root.finish(tuple(SECTIONS))
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
    )
