"""The delayed-messages panel: the levels' held counts and paused partitions, the file wheel's copies."""

from __future__ import annotations

from rich import box
from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from minibroker.delayed_messages.view import DelaysView


def _table(title: str, columns: tuple[str, ...]) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), expand=False)
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i == 0 else "right", no_wrap=True)
    return table


def delayed_messages_panel(view: DelaysView) -> Panel:
    """One row per level partition a live service leads, one row per wheel copy."""
    parts = []
    if view.levels:
        levels = _table(f"delay levels · delivered {view.levels_delivered:,}", ("partition", "held", "fetch"))
        for level in view.levels:
            fetch = Text("paused", style="bold yellow") if level.paused else Text("fetching", style="green")
            levels.add_row(level.partition, f"{level.held:,}", fetch)
        parts.append(levels)
    if view.wheel:
        title = f"file wheel · tick {view.wheel_tick_ms:,} ms · delivered {view.wheel_delivered:,}"
        columns = ("broker", "role", "pointer", "slot", "slots with messages", "open files", "bytes")
        wheel = _table(title, columns)
        styles = {"active": "bold green", "standby": "cyan", "out of sync": "red"}
        for copy in view.wheel:
            w = copy.wheel
            wheel.add_row(
                str(copy.broker),
                Text(copy.role, style=styles[copy.role]),
                f"{w.pointer:,}",
                f"{w.slot:,}",
                f"{w.slots_with_messages:,}",
                f"{w.open_files:,}",
                f"{w.bytes_on_disk:,}",
            )
        parts.append(wheel)
    grid = Table.grid(padding=(0, 4))
    for _ in parts:
        grid.add_column(vertical="top")
    grid.add_row(*parts)
    return Panel(Group(grid), title="delayed messages", title_align="left", border_style="blue")
