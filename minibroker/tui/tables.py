"""The table every section of the TUI's frame draws: compact, its bold title on the left."""

from __future__ import annotations

from rich import box
from rich.table import Table


def section_table(title: str) -> Table:
    """A compact table with a bold title on the left, as every section of the frame draws one."""
    return Table(
        title=title,
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
