"""Shared fixtures. ``autojump_clock`` (pytest-trio) gives instant, exact virtual time."""

import os

import pytest

from minibroker.runtime import deterministic_scheduling

#: MINIBROKER_TEST_SEED=n runs the suite under another fixed ordering (to hunt order-dependent tests)
SEED = int(os.environ.get("MINIBROKER_TEST_SEED", "0"))


@pytest.fixture(autouse=True)
def _deterministic_trio_scheduling():
    """Every test runs trio with one fixed order for tasks woken at the same instant: no flaky orderings.

    (The Hypothesis property tests reseed it per example and so still explore other orderings.)
    """
    with deterministic_scheduling(SEED):
        yield


#: the application-test fixtures (``minibroker``, ``minibroker_factory``); an installed minibroker also
#: registers them through its ``pytest11`` entry point, under this same name, so they load once
pytest_plugins = ["minibroker.testing.pytest_plugin"]
