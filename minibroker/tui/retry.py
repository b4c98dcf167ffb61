"""The retries panel: records in the retry topics and the DLT, the scheduler's pending count, outcomes."""

from __future__ import annotations

from rich import box
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from minibroker.scenario.features.retry import RetryView

#: topics listed at most (a policy may have up to 100 attempts); the rest are summed on one row
MAX_ROWS = 8


def _topics(view: RetryView) -> Table:
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), expand=False)
    table.add_column("topic", no_wrap=True)
    table.add_column("role", no_wrap=True)
    table.add_column("records", justify="right", no_wrap=True)
    rows = []
    for i, topic in enumerate(view.topics):
        if i == 0:
            rows.append((topic.name, Text("source"), topic.records))
        elif topic.name.endswith("-dlt") and i == len(view.topics) - 1:
            rows.append((topic.name, Text("dead letters", style="red"), topic.records))
        else:
            rows.append((topic.name, Text(f"after attempt {i}", style="yellow"), topic.records))
    if len(rows) > MAX_ROWS:
        hidden = rows[MAX_ROWS - 2 : -1]
        total = sum(records for _, _, records in hidden)
        rows = [*rows[: MAX_ROWS - 2], (f"… {len(hidden)} more", Text("retry topics"), total), rows[-1]]
    for name, role, records in rows:
        table.add_row(name, role, f"{records:,}")
    return table


def _figures(view: RetryView) -> Text:
    text = Text()
    text.append(
        "blocking retries (in place)\n" if view.blocking else f"{view.backend} scheduler\n", style="bold"
    )
    if not view.blocking:
        text.append("pending   ")
        text.append(f"{view.pending:,}\n", style="bold yellow" if view.pending else "bold")
    text.append(f"processed {view.processed:,}\n", style="green")
    text.append(f"dead      {view.dead:,}\n", style="bold red" if view.dead else None)
    text.append(f"handler calls {view.deliveries:,}")
    for partition, until in view.paused:
        text.append(f"\n{view.topic}-{partition} paused until {until:,} ms", style="bold yellow")
    return text


def retry_panel(view: RetryView) -> Panel:
    """The chain's topics (records below the HW) and the retrying consumer's figures beside them."""
    grid = Table.grid(padding=(0, 4))
    grid.add_column(vertical="top")
    grid.add_column(vertical="top")
    grid.add_row(_topics(view), _figures(view))
    return Panel(grid, title=f"retries of {view.topic}", title_align="left", border_style="magenta")
