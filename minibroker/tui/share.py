"""The share partitions panel (KIP-932): each share partition's window on its leader.

One row per share partition: SPSO..SPEO, how many records are in each state, the window itself (one cell
per offset in flight: its state and delivery count) and the acquisition locks counting down on the timer.
"""

from __future__ import annotations

from rich import box
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from minibroker.sim.share_view import SharePartitionView

#: offsets drawn per window at most (the rest are summed)
MAX_CELLS = 24
#: a state's mark and style in the window strip
MARKS = {
    "Available": ("○", "yellow"),
    "Acquired": ("●", "bold cyan"),
    "Acknowledged": ("✓", "green"),
    "Archived": ("✗", "red"),
}
STATES = tuple(MARKS)
#: the count columns' headers
SHORT = {"Available": "avail", "Acquired": "acq", "Acknowledged": "ack", "Archived": "arch"}


def _window(view: SharePartitionView) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    for record in view.records[:MAX_CELLS]:
        mark, style = MARKS[record.state]
        text.append(f"{record.offset}", style="dim")
        text.append(f"{mark}{record.delivery_count} ", style=style)
    if len(view.records) > MAX_CELLS:
        text.append(f"… {len(view.records) - MAX_CELLS:,} more", style="dim")
    if not view.records:
        text.append("(empty)", style="dim")
    return text


def _locks(view: SharePartitionView, now_ms: int) -> Text:
    """Each lock as its member, its first..last offset and the ms left until it expires."""
    locks: dict[tuple[int, str], list[int]] = {}
    for record in view.records:
        if record.lock_deadline_ms is not None:
            locks.setdefault((record.lock_deadline_ms, record.member or "?"), []).append(record.offset)
    text = Text(no_wrap=True, overflow="ellipsis")
    for i, ((deadline, member), offsets) in enumerate(sorted(locks.items())):
        if i:
            text.append("  ")
        span = f"{offsets[0]}" if len(offsets) == 1 else f"{offsets[0]}..{offsets[-1]}"
        left = deadline - now_ms
        text.append(f"{member} {span} ")
        text.append(f"{left:,} ms", style="bold red" if left <= 1000 else "bold")
    return text


def share_panel(views: tuple[SharePartitionView, ...], now_ms: int) -> Panel:
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), expand=False)
    table.add_column("share partition", no_wrap=True)
    table.add_column("SPSO..SPEO", justify="right", no_wrap=True)
    for state in STATES:
        mark, style = MARKS[state]
        table.add_column(Text(f"{mark} {SHORT[state]}", style=style), justify="right", no_wrap=True)
    table.add_column("expiries", justify="right", no_wrap=True)
    table.add_column("window: offset, state, delivery count", no_wrap=True)
    table.add_column("locks: member, offsets, expire in", no_wrap=True)
    for view in views:
        table.add_row(
            f"{view.group} {view.label} @b{view.leader}",
            f"{view.spso:,}..{view.speo:,}",
            *(f"{view.count(state):,}" for state in STATES),
            f"{view.lock_expiries:,}",
            _window(view),
            _locks(view, now_ms),
        )
    return Panel(table, title="share partitions", title_align="left", border_style="cyan")
