"""A frame as an SVG picture: rich's terminal export, made to render the same outside a browser.

rich's SVG writes runs of spaces as no-break spaces, which browsers keep but
librsvg and cairosvg drop at the start of a text run, misaligning every right-aligned
column. So the picture asks for ``xml:space="preserve"`` on its root. The template
is otherwise rich's own (window chrome, theme, title). ``for_rasterizer`` makes the
font a plain ``monospace`` for converters that cannot read a font list (cairosvg).
"""

from __future__ import annotations

import io

from rich.console import CONSOLE_SVG_FORMAT, Console

from minibroker.tui.render import render_frame
from minibroker.tui.state import Frame

#: rich's template with spaces preserved
SVG_FORMAT = CONSOLE_SVG_FORMAT.replace(
    '<svg class="rich-terminal"', '<svg class="rich-terminal" xml:space="preserve"', 1
)
_FONT = "font-family: Fira Code, monospace;"


def for_rasterizer(svg: str) -> str:
    """The picture with its font list reduced to ``monospace`` (what a rasterizer has)."""
    return svg.replace(_FONT, "font-family: monospace;")


def frame_svg(frame: Frame, *, width: int = 120, events: int = 14, title: str | None = None) -> str:
    """The SVG text of ``frame`` rendered at ``width`` columns (its full height)."""
    console = Console(
        record=True, width=width, file=io.StringIO(), force_terminal=True, color_system="truecolor"
    )
    console.print(render_frame(frame, console, events=events))
    return console.export_svg(
        title=title or f"minibroker · {frame.scenario} at {frame.time_ms:,} ms",
        code_format=SVG_FORMAT,
        unique_id="minibroker",
    )
