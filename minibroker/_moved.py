"""Old import paths of the public API, kept one release after a package moves: they warn and forward.

A moved package's old ``__init__`` is two lines::

    from minibroker._moved import moved_package

    __all__, __getattr__ = moved_package(__name__, "minibroker.sim", "the cluster harness")

Importing it warns once (a DeprecationWarning naming the new home; the module is cached, so later imports
are silent) and every name the package exported resolves to the same object at its new home.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable


def moved_package(old: str, new: str, what: str) -> tuple[list[str], Callable[[str], object]]:
    """Warn that ``old`` moved to ``new``; the ``__all__`` and module ``__getattr__`` that forward to it."""
    warnings.warn(
        f"{old} is deprecated and will be removed in the next release: import {what} from {new}",
        DeprecationWarning,
        stacklevel=3,
    )
    home = importlib.import_module(new)
    names = list(home.__all__)

    def forward(name: str) -> object:
        if name in names:
            return getattr(home, name)
        raise AttributeError(f"module {old!r} has no attribute {name!r}")

    return names, forward
