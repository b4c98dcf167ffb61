"""SVG to PNG, with whichever converter this machine has.

``rsvg-convert`` (Debian's librsvg2-bin) when it is on PATH, else the ``cairosvg``
package (``pip install 'minibroker[png]'``; it needs the cairo library). With
neither, ``svg_to_png`` raises ``UsageError`` naming both.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from minibroker.cliutil import UsageError
from minibroker.extras import optional_import
from minibroker.tui.picture import for_rasterizer

MISSING = (
    "--png needs an SVG converter: install rsvg-convert (Debian: apt-get install librsvg2-bin) "
    "or the png extra (cairosvg): pip install 'minibroker[png]'"
)


def _rsvg(svg: str, path: Path) -> None:
    done = subprocess.run(
        ["rsvg-convert", "--format=png", f"--output={path}"], input=svg.encode(), capture_output=True
    )
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise UsageError(f"--png: rsvg-convert failed: {message[-1] if message else done.returncode}")


def _cairosvg() -> Callable[[str, Path], None] | None:
    try:
        cairosvg = optional_import("cairosvg", "png")
    except (ImportError, OSError):  # OSError: the package is there but the cairo library is not
        return None

    def convert(svg: str, path: Path) -> None:
        cairosvg.svg2png(bytestring=svg.encode(), write_to=str(path))

    return convert


def converter() -> tuple[str, Callable[[str, Path], None]] | None:
    """(name, convert) of the converter to use, or None."""
    if shutil.which("rsvg-convert"):
        return "rsvg-convert", _rsvg
    convert = _cairosvg()
    return ("cairosvg", convert) if convert is not None else None


def svg_to_png(svg: str, path: str | Path) -> str:
    """Write ``svg`` as a PNG to ``path``; returns the converter's name."""
    found = converter()
    if found is None:
        raise UsageError(MISSING)
    name, convert = found
    try:
        convert(for_rasterizer(svg), Path(path))
    except OSError as error:
        raise UsageError(f"--png: cannot write {path}: {error.strerror or error}") from None
    return name
