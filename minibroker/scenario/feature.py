"""The feature registry: what a feature adds to scenarios, registered once, used by the loader and the runner.

A feature (delayed messages, retries) brings top-level TOML sections, kinds of expectation and a part
of its own in each run. It describes them in one ``Feature`` and calls ``register``; the loader reads
the registered sections and expectation kinds, and the runner starts each registered feature's run and
asks it to check its expectations, so neither imports a feature. The bundled features register when
``minibroker.scenario`` is imported (``minibroker.scenario.features``).

Registration order is the order the sections are read (after ``[[topics]]``) and the runs start.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import attrs


@attrs.frozen
class Section:
    """A top-level TOML section: ``read(root, scope)`` stores what it read on the loader's scope.

    It is skipped while a section in ``needs`` has a problem; the core sections in ``referenced_by``
    (``clients``, ``steps``, ``expect``) are skipped while it has one.
    """

    name: str
    read: Callable[[Any, Any], None]
    needs: tuple[str, ...]
    referenced_by: tuple[str, ...]


@attrs.frozen
class ExpectationKind:
    """An ``[[expect]]`` kind: the key that names it, its parser ``(table, scope, index)``, the model
    type it builds and ``check(expectation, run)`` against the feature's ``FeatureRun``.

    ``timed`` kinds are checked at the end of their millisecond, the others when the run ends;
    ``listed_after`` is the kind error messages list it after.
    """

    key: str
    parse: Callable[[Any, Any, int], Any]
    model: type
    check: Callable[[Any, Any], Any]
    timed: bool
    listed_after: str


class FeatureRun(Protocol):
    """A feature's part in one run: ``prepare`` before trio starts (reach an outside server),
    ``start`` once the cluster is up, ``close`` when the run ends (also when cancelled), ``view`` the
    state now for the live view (None when the scenario does not use the feature)."""

    def prepare(self) -> None: ...

    async def start(self, cluster: Any) -> None: ...

    def close(self) -> None: ...

    def view(self) -> Any: ...


@attrs.frozen
class Feature:
    """One feature: its name, sections, expectation kinds and ``run(scenario, seed) -> FeatureRun``."""

    name: str
    sections: tuple[Section, ...]
    expectations: tuple[ExpectationKind, ...]
    run: Callable[[Any, int], FeatureRun]


_FEATURES: dict[str, Feature] = {}


def register(feature: Feature) -> Feature:
    """Add ``feature`` (a name registered twice is an error: two features would read one section)."""
    if feature.name in _FEATURES:
        raise ValueError(f"feature {feature.name!r} is already registered")
    _FEATURES[feature.name] = feature
    return feature


def features() -> tuple[Feature, ...]:
    """The registered features, in registration order."""
    return tuple(_FEATURES.values())
