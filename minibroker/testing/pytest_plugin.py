"""pytest fixtures for application tests (registered by the ``pytest11`` entry point).

- ``minibroker``: a started 3-broker ``MiniCluster`` (auto-created topics get
  3 replicas), stopped after the test;
- ``minibroker_factory``: ``minibroker_factory(brokers=..., topics=[...], config={...})``
  starts one with those settings; every cluster it started is stopped after the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # imported when a fixture is used: the plugin loads in every pytest run
    from minibroker.testing.cluster import MiniCluster


@pytest.fixture
def minibroker_factory() -> Iterator[Callable[..., MiniCluster]]:
    from minibroker.testing.cluster import MiniCluster

    started: list[MiniCluster] = []

    def start(*args: Any, **kwargs: Any) -> MiniCluster:
        cluster = MiniCluster(*args, **kwargs).start()
        started.append(cluster)
        return cluster

    yield start
    for cluster in started:
        cluster.stop()


@pytest.fixture
def minibroker(minibroker_factory: Callable[..., MiniCluster]) -> MiniCluster:
    return minibroker_factory(3, config={"default.replication.factor": 3})
