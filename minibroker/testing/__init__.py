"""Fault injection for application tests: a served cluster whose faults a test triggers on cue.

``MiniCluster`` / ``mini_cluster`` run ``minibroker serve`` in-process; the
pytest plugin (``pytest_plugin``) offers them as fixtures; ``http`` exposes
the same ``Control`` actions to other languages (``serve --control PORT``).
"""

from minibroker.testing.cluster import MiniCluster, mini_cluster
from minibroker.testing.control import Control, parse_error

__all__ = ["Control", "MiniCluster", "mini_cluster", "parse_error"]
