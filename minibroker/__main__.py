"""``python -m minibroker``: the same as the ``minibroker`` command."""

from minibroker.cli import entry_point

entry_point()
