"""Deprecated name of the emulated cluster harness, kept for one release: import ``minibroker.sim``."""

from minibroker._moved import moved_package

__all__, __getattr__ = moved_package(__name__, "minibroker.sim", "the cluster harness")
