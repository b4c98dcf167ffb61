"""Shared fixtures. ``autojump_clock`` (pytest-trio) gives instant, exact virtual time."""
