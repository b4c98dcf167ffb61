"""Optional packages: the one way to import them, and the one line that names the extra to install.

``optional_import("pyarrow", "parquet", "a .parquet trace")`` returns the module, or raises
``MissingExtra``: "a .parquet trace needs the parquet extra (pyarrow is not installed): pip install
'minibroker[parquet]'". The CLI prints it after the command's name as a usage error (exit status 2);
library callers get an ``ImportError``. ``EXTRAS`` lists what each extra of pyproject.toml brings
that minibroker imports (a test checks the two agree). Standard library only: any layer may use it.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

#: extra -> the top-level modules minibroker imports from it
EXTRAS = {
    "parquet": ("pyarrow",),
    "png": ("cairosvg",),
    "spark": ("pyspark", "pyarrow", "matplotlib"),
    "retry": ("redis",),
}


class MissingExtra(ImportError):
    """An optional package is not installed; the message is one line naming the extra that brings it."""


def optional_import(module: str, extra: str, what: str = "") -> ModuleType:
    """``module`` imported, or ``MissingExtra`` saying that ``what`` needs ``extra``.

    Only the top-level package being absent is a missing extra; an error inside an installed package
    (a submodule it lacks, a dependency of its own) propagates as it is.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        top = module.partition(".")[0]
        if installed(top):
            raise
        raise MissingExtra(missing_message(extra, what, top), name=top) from None


def require(extra: str, what: str = "") -> None:
    """Every module of ``extra`` installed, else ``MissingExtra``: a command checks before it starts,
    without importing them (that comes when they are used)."""
    for module in EXTRAS[extra]:
        if not installed(module):
            raise MissingExtra(missing_message(extra, what, module), name=module)


def installed(module: str) -> bool:
    """Whether the top-level ``module`` can be imported (found, not blocked), without importing it."""
    if module in sys.modules:
        return sys.modules[module] is not None
    return importlib.util.find_spec(module) is not None


def missing_message(extra: str, what: str, module: str) -> str:
    lead = f"{what} needs" if what else "needs"
    return f"{lead} the {extra} extra ({module} is not installed): pip install 'minibroker[{extra}]'"
