"""Fault injection for application tests: a served cluster whose faults a test triggers on cue.

``MiniCluster`` / ``mini_cluster`` run ``minibroker serve`` in-process; the
pytest plugin (``pytest_plugin``) offers them as fixtures; ``Control``, the handle
on a served cluster's faults, is the server's (``minibroker.server.control``), which
also exposes its actions to other languages (``serve --control PORT``). A front end
that wraps the server's control handle.
"""

from minibroker.server.control import Control
from minibroker.testing.cluster import MiniCluster, mini_cluster

__all__ = ["Control", "MiniCluster", "mini_cluster"]
