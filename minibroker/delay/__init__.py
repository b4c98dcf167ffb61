"""Deprecated name of the delayed messages package, kept for one release: ``minibroker.delayed_messages``."""

from minibroker._moved import moved_package

__all__, __getattr__ = moved_package(__name__, "minibroker.delayed_messages", "delayed messages")
