"""Frames as rich renderables: pure functions of a ``Frame``, testable on a recording Console.

``render_frame(frame, console)`` lays out, top to bottom: the header (scenario, virtual
time, speed, keys), the chosen broker's timing wheel and delay queue, the purgatories
of every broker and the partitions (side by side on wide screens), then the event log
and the expectations. With a ``height`` (the live screen) the frame is exactly that
many lines: the log shows as many of the latest events as the rest leaves room for
(on a short screen only the chosen broker's purgatories are listed); without one (a
snapshot picture) it shows the last ``events`` events and every expectation.
"""

from __future__ import annotations

from rich import box
from rich.console import Console, Group, RenderableType
from rich.layout import Layout
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from minibroker.cluster.snapshot import ReplicaView
from minibroker.tui.delay import delay_panel
from minibroker.tui.describe import describe_event
from minibroker.tui.state import CAUSES, Frame
from minibroker.tui.wheel import WheelView

KEYS = "space pause · n step · +/- speed · b broker · q quit"
#: the purgatory figures: watched keys, PurgatorySize, NumDelayedOperations, completions by cause, purges
PURGATORY_COLUMNS = ("keys", "watched", "delayed", "condition", "expired", "leadership", "purges")
#: below this width the purgatories and partitions are stacked instead of side by side
SIDE_BY_SIDE_WIDTH = 150
#: with fewer lines left for the events and expectations, only the chosen broker's purgatories show
MIN_LOG_LINES = 12


def speed_text(speed: float) -> str:
    """``×0.0225 (1 s = 22.5 ms)``: the multiple of real time and what one real second covers."""
    per_second = speed * 1000
    shown = f"{per_second:,.3g} ms" if per_second < 1000 else f"{speed:,.3g} s"
    return f"×{speed:.3g} (1 s = {shown})"


def header(frame: Frame) -> Group:
    """Two lines: the scenario, then the virtual time, mode, speed, broker and keys (cut to the width)."""
    status = frame.status
    title = Text(no_wrap=True, overflow="ellipsis")
    title.append(" minibroker ", style="bold white on blue")
    title.append(f" {frame.scenario}", style="bold")
    title.append(f" — {frame.description}", style="dim")
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append(f" t = {frame.time_ms:,} ms", style="bold")
    line.append(f" virtual (span ~{frame.span_ms:,} ms)", style="dim")
    mode = status.mode
    styles = {"running": "green", "paused": "yellow", "finished": "cyan", "snapshot": "cyan"}
    line.append(f"   {mode}", style=f"bold {styles.get(mode, '')}")
    if status.speed is not None:
        line.append(f" {speed_text(status.speed)}")
    if status.note:
        line.append(f"   {status.note}", style="bold")
    line.append(f"   broker {frame.broker}", style="bold")
    if status.keys:
        line.append(f"   {KEYS}", style="dim")
    return Group(title, line)


def wheel_panel(frame: Frame) -> Panel:
    broker = frame.view.broker(frame.broker)
    timer = broker.timer
    if timer is None:
        body: RenderableType = Text(f"broker {frame.broker} is down: no timer", style="red")
        title = f"timing wheel · broker {frame.broker} (down)"
    else:
        body = WheelView(timer)
        title = (
            f"timing wheel · broker {frame.broker} · {timer.kind} timer · {timer.size:,} armed"
            f" · reaper last advanced it at {timer.now:,} ms"
        )
    return Panel(body, title=title, title_align="left", border_style="blue")


def _section_table(title: str) -> Table:
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


def purgatory_table(frame: Frame, only_chosen: bool = False) -> Table:
    """Both purgatories of every broker (or of the chosen one only), the chosen broker in bold."""
    table = _section_table("purgatories · watched = PurgatorySize · delayed = NumDelayedOperations")
    table.add_column("purgatory", no_wrap=True)
    for column in PURGATORY_COLUMNS:
        table.add_column(column, justify="right")
    table.add_column("last purge")
    for broker in frame.view.brokers:
        if only_chosen and broker.broker != frame.broker:
            continue
        style = "bold" if broker.broker == frame.broker else ""
        if not broker.alive:
            table.add_row(f"b{broker.broker} down", *[""] * 8, style="red")
            continue
        for purgatory in broker.purgatories:
            done = [frame.completed.get((broker.broker, purgatory.name, cause), 0) for cause in CAUSES]
            last = purgatory.last_purge
            table.add_row(
                f"b{broker.broker} {purgatory.name}",
                f"{purgatory.watched_keys:,}",
                f"{purgatory.watched:,}",
                f"{purgatory.num_delayed:,}",
                *(f"{n:,}" for n in done),
                f"{purgatory.purges:,}",
                "-" if last is None else f"{last[0]:,} ms: -{last[1]:,}",
                style=style,
            )
    return table


def _replica(partition_leader: int, replica: ReplicaView) -> Text:
    text = Text(f"b{replica.broker}", style="bold" if replica.broker == partition_leader else "")
    if replica.broker == partition_leader:
        text.append("*")
    text.append(f" {replica.log_end_offset:,}/{replica.high_watermark:,}")
    if not replica.alive:
        text.append(" down", style="bold red")
    elif replica.fetcher_paused:
        text.append(" paused", style="yellow")
    return text


def partition_table(frame: Frame) -> Table:
    """Leader, epoch, the controller's ISR (a change the leader proposed marked pending), LEO/HW."""
    table = _section_table("partitions (replicas: LEO/HW, * leader)")
    for column in ("partition", "leader", "epoch", "ISR", "replicas"):
        table.add_column(column, justify="right" if column in ("leader", "epoch") else "left")
    for partition in frame.view.partitions:
        isr = Text(",".join(map(str, partition.isr)))
        if partition.pending_isr == partition.isr:
            isr.append(" committed, leader not told yet", style="yellow")
        elif partition.pending_isr is not None:
            isr.append(f" → {','.join(map(str, partition.pending_isr))} pending", style="yellow")
        replicas = Text("  ").join(_replica(partition.leader, r) for r in partition.replicas)
        leader = str(partition.leader) if partition.leader >= 0 else "none"
        table.add_row(partition.partition, leader, str(partition.leader_epoch), isr, replicas)
    return table


def event_lines(frame: Frame, count: int) -> Text:
    """The latest ``count`` events, oldest first: time, broker, kind, description."""
    text = Text(no_wrap=True, overflow="ellipsis")
    shown = frame.events[-count:] if count > 0 else ()
    for n, event in enumerate(shown):
        if n:
            text.append("\n")
        broker = event.get("broker")
        text.append(f"{event['time_ms']:>7,} ", style="bold")
        text.append(f"{'' if broker is None else f'b{broker}':>3} ", style="dim")
        text.append(f"{event['kind']:<19} ", style="cyan")
        text.append(describe_event(event))
    return text


def expectation_lines(frame: Frame, wrap: bool = True) -> Text:
    """One line per expectation: ✓ passed, ✗ failed (with what was seen), · not decided yet."""
    text = Text(no_wrap=not wrap, overflow="fold" if wrap else "ellipsis")
    for n, line in enumerate(frame.expectations):
        if n:
            text.append("\n")
        if line.passed is None:
            text.append("· ", style="dim")
        elif line.passed:
            text.append("✓ ", style="bold green")
        else:
            text.append("✗ ", style="bold red")
        text.append(f"{line.where} ", style="dim")
        text.append(line.text, style="" if line.passed is not False else "red")
        if line.passed is False:
            text.append(f" — seen {line.seen}", style="bold red")
    return text


def expectation_title(frame: Frame) -> str:
    lines = frame.expectations
    passed = sum(1 for line in lines if line.passed)
    failed = sum(1 for line in lines if line.passed is False)
    return f"expectations · {passed} passed · {failed} failed · {len(lines) - passed - failed} to come"


def _middle(frame: Frame, width: int, only_chosen: bool = False) -> Table:
    grid = Table.grid(expand=True, padding=(0, 2))
    purgatories = purgatory_table(frame, only_chosen)
    if width >= SIDE_BY_SIDE_WIDTH:
        grid.add_column(ratio=3)
        grid.add_column(ratio=2)
        grid.add_row(purgatories, partition_table(frame))
    else:
        grid.add_column()
        grid.add_row(purgatories)
        grid.add_row(partition_table(frame))
    return grid


def _events_panel(frame: Frame, count: int, height: int | None) -> Panel:
    return Panel(
        event_lines(frame, count),
        title=f"events · latest of {frame.events_total:,}",
        title_align="left",
        height=height,
        border_style="blue",
    )


def _expectations_panel(frame: Frame, height: int | None) -> Panel:
    return Panel(
        expectation_lines(frame, wrap=height is None),
        title=expectation_title(frame),
        title_align="left",
        height=height,
        border_style="blue",
    )


def _height(console: Console, renderable: RenderableType, width: int) -> int:
    return len(console.render_lines(renderable, console.options.update(width=width, height=None)))


def render_frame(
    frame: Frame, console: Console, height: int | None = None, events: int = 14
) -> RenderableType:
    """The whole frame at the console's width; fitted to ``height`` lines when given.

    Fitted, the events and the expectations share the lines the rest leaves: the
    expectations take what they need up to half, the events the others.
    """
    width = console.options.max_width
    top = [header(frame), wheel_panel(frame), _middle(frame, width)]
    if frame.delays is not None:
        top.append(delay_panel(frame.delays))
    if height is None:
        return Group(*top, _events_panel(frame, events, None), _expectations_panel(frame, None))
    sizes = [_height(console, part, width) for part in top]
    if height - sum(sizes) < MIN_LOG_LINES:
        top[2] = _middle(frame, width, only_chosen=True)
        sizes[2] = _height(console, top[2], width)
    left = height - sum(sizes)
    parts = [Layout(part, size=size) for part, size in zip(top, sizes, strict=True)]
    if left >= 3:
        wanted = len(frame.expectations) + 2
        expectation_size = min(wanted, left // 2) if frame.expectations and left >= 6 else 0
        event_size = left - expectation_size
        parts.append(Layout(_events_panel(frame, event_size - 2, event_size), size=event_size))
        if expectation_size:
            parts.append(Layout(_expectations_panel(frame, expectation_size), size=expectation_size))
    layout = Layout()
    layout.split_column(*parts)
    return layout
