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

from rich.console import Console, Group, RenderableType
from rich.layout import Layout
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from minibroker.coordinator.group.views import ConsumerGroupView
from minibroker.sim.snapshot import PartitionView, ReplicaView
from minibroker.tui.delayed_messages import delayed_messages_panel
from minibroker.tui.describe import describe_event
from minibroker.tui.retry import retry_panel
from minibroker.tui.share import share_panel
from minibroker.tui.state import CAUSES, Frame, Tally
from minibroker.tui.tables import section_table
from minibroker.tui.transactions import has_transactions, lso_cell, transactions_table
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


def header(frame: Frame, width: int | None = None) -> Group:
    """The scenario, then the virtual time, mode, speed, broker and keys (each line cut to the width).

    When the keys do not fit on the second line at ``width`` they get a third line of their
    own, and when the second line does not fit either it leaves out the span and what one
    real second covers.
    """
    status = frame.status
    title = Text(no_wrap=True, overflow="ellipsis")
    title.append(" minibroker ", style="bold white on blue")
    title.append(f" {frame.scenario}", style="bold")
    title.append(f" — {frame.description}", style="dim")
    line = _status_line(frame, short=False)
    if width is not None and line.cell_len + (3 + len(KEYS) if status.keys else 0) > width:
        if line.cell_len > width:
            line = _status_line(frame, short=True)
        if status.keys:
            return Group(title, line, Text(f" {KEYS}", style="dim", no_wrap=True, overflow="ellipsis"))
        return Group(title, line)
    if status.keys:
        line.append(f"   {KEYS}", style="dim")
    return Group(title, line)


def _status_line(frame: Frame, short: bool) -> Text:
    status = frame.status
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append(f" t = {frame.time_ms:,} ms", style="bold")
    line.append(" virtual" if short else f" virtual (span ~{frame.span_ms:,} ms)", style="dim")
    mode = status.mode
    styles = {"running": "green", "paused": "yellow", "finished": "cyan", "snapshot": "cyan"}
    line.append(f"   {mode}", style=f"bold {styles.get(mode, '')}")
    if status.speed is not None:
        line.append(f" ×{status.speed:.3g}" if short else f" {speed_text(status.speed)}")
    if status.achieved is not None:
        line.append(f"   behind: ×{status.achieved:.2g}", style="bold red")
    if status.note:
        line.append(f"   {status.note}", style="bold")
    line.append(f"   broker {frame.broker}", style="bold")
    return line


def wheel_panel(frame: Frame, compact: bool = False) -> Panel:
    broker = frame.view.broker(frame.broker)
    timer = broker.timer
    if timer is None:
        body: RenderableType = Text(f"broker {frame.broker} is down: no timer", style="red")
        title = f"timing wheel · broker {frame.broker} (down)"
    else:
        body = WheelView(timer, compact=compact)
        title = (
            f"timing wheel · broker {frame.broker} · {timer.kind} timer · {timer.size:,} armed"
            f" · reaper last advanced it at {timer.now:,} ms"
        )
    return Panel(body, title=title, title_align="left", border_style="blue")


def purgatory_table(frame: Frame, only_chosen: bool = False) -> Table:
    """Every purgatory of every broker (or of the chosen one only), the chosen broker in bold."""
    table = section_table("purgatories · watched = PurgatorySize · delayed = NumDelayedOperations")
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
    if replica.log_start_offset:  # DeleteRecords moved it
        text.append(f" start {replica.log_start_offset:,}", style="dim")
    if replica.local_log_start_offset > replica.log_start_offset:  # tiered storage: below it, remote only
        text.append(f" local {replica.local_log_start_offset:,}", style="dim")
    if not replica.alive:
        text.append(" down", style="bold red")
    elif replica.fetcher_paused:
        text.append(" paused", style="yellow")
    return text


def _moving(partition: PartitionView) -> Text:
    """An ongoing reassignment: the replicas being added and removed (empty text when none)."""
    if not partition.adding and not partition.removing:
        return Text()
    adding = ",".join(map(str, partition.adding)) or "-"
    removing = ",".join(map(str, partition.removing)) or "-"
    return Text(f"  adding {adding} removing {removing}", style="magenta")


def partition_table(frame: Frame) -> Table:
    """Leader, epoch, the controller's ISR (a change the leader proposed marked pending), LEO/HW;
    with transactions in the cluster, the leader's LSO (``transactions.lso_cell``) after the epoch."""
    lso = has_transactions(frame.view)
    title = "partitions (replicas: LEO/HW, * leader" + ("; LSO −held)" if lso else ")")
    table = section_table(title)
    columns = ("partition", "leader", "epoch", *(("LSO",) if lso else ()), "ISR", "replicas")
    for column in columns:
        table.add_column(column, justify="right" if column in ("leader", "epoch", "LSO") else "left")
    for partition in frame.view.partitions:
        isr = Text(",".join(map(str, partition.isr)))
        if partition.pending_isr == partition.isr:
            isr.append(" committed, leader not told yet", style="yellow")
        elif partition.pending_isr is not None:
            isr.append(f" → {','.join(map(str, partition.pending_isr))} pending", style="yellow")
        replicas = Text("  ").join(_replica(partition.leader, r) for r in partition.replicas)
        replicas.append_text(_moving(partition))
        leader = str(partition.leader) if partition.leader >= 0 else "none"
        stable = (lso_cell(partition),) if lso else ()
        table.add_row(partition.partition, leader, str(partition.leader_epoch), *stable, isr, replicas)
    return table


def compact_middle(frame: Frame, partitions: int) -> Text:
    """For small screens: the chosen broker's purgatories and the first ``partitions`` partitions,
    a line each."""
    broker = frame.view.broker(frame.broker)
    lines: list[Text] = []
    if not broker.alive:
        lines.append(Text(f"b{broker.broker} down", style="red"))
    for purgatory in broker.purgatories if broker.alive else ():
        done = [frame.completed.get((broker.broker, purgatory.name, cause), 0) for cause in CAUSES]
        line = Text(f"b{broker.broker} {purgatory.name:<8}", style="bold")
        line.append(f" watched {purgatory.watched:,}  delayed {purgatory.num_delayed:,}")
        line.append("".join(f"  {name} {n:,}" for name, n in zip(PURGATORY_COLUMNS[3:6], done, strict=True)))
        line.append(f"  purges {purgatory.purges:,}")
        lines.append(line)
    shown = frame.view.partitions[:partitions]
    lso = has_transactions(frame.view)
    for partition in shown:
        line = Text(f"{partition.partition} ", style="bold")
        leader = str(partition.leader) if partition.leader >= 0 else "none"
        isr = ",".join(map(str, partition.isr))
        line.append(f"leader {leader} epoch {partition.leader_epoch} ")
        if lso:
            line.append("LSO ")
            line.append_text(lso_cell(partition))
            line.append(" ")
        line.append(f"ISR {isr} ")
        if partition.pending_isr is not None and partition.pending_isr != partition.isr:
            line.append(f"→ {','.join(map(str, partition.pending_isr))} pending ", style="yellow")
        line.append_text(Text(" ").join(_replica(partition.leader, r) for r in partition.replicas))
        line.append_text(_moving(partition))
        lines.append(line)
    if len(frame.view.partitions) > len(shown):
        lines.append(Text(f"… {len(frame.view.partitions) - len(shown)} more partitions", style="dim"))
    return Text("\n", no_wrap=True, overflow="ellipsis").join(lines)


def coordinator_table(frame: Frame) -> Group | None:
    """The chosen broker's group coordinator: its groups, members' session deadlines, keyed timers.

    None when the broker coordinates nothing (no ``__consumer_offsets`` partition led there).
    """
    view = frame.view.broker(frame.broker).coordinator
    if view is None:
        return None
    parts = ",".join(map(str, view.partitions)) or "none"
    loading = ",".join(map(str, view.loading))
    title = (
        f"group coordinator · broker {frame.broker} · __consumer_offsets partitions {parts}"
        + (f" · loading {loading} (COORDINATOR_LOAD_IN_PROGRESS)" if loading else "")
        + f" · {len(view.timers)} keyed timer tasks on the wheel"
    )
    table = section_table(title)
    for column in ("group", "state", "gen", "protocol", "leader", "members (session deadline ms)"):
        table.add_column(column, justify="right" if column == "gen" else "left")
    names: dict[str, str] = {}
    for group in view.groups:
        members = Text()
        for n, member in enumerate(group.members):
            names[member.member_id] = member.client_id
            if n:
                members.append("  ")
            members.append(member.client_id, style="bold")
            deadline = "-" if member.session_deadline_ms < 0 else f"{member.session_deadline_ms:,}"
            members.append(f" {deadline}")
            if member.awaiting:
                members.append(f" awaiting {member.awaiting}", style="yellow")
        if group.pending:
            members.append(f"  +{group.pending} pending id", style="dim")
        state_style = {"Stable": "green", "PreparingRebalance": "yellow", "CompletingRebalance": "yellow"}
        table.add_row(
            group.group_id,
            Text(group.state, style=state_style.get(group.state, "dim")),
            str(group.generation),
            group.protocol or "-",
            group.leader or "-",
            members,
        )
    consumer = consumer_group_table(frame, view.consumer_groups, names, "" if view.groups else title)
    timers = Text("keyed timers (deadline ms): ", style="bold")
    for n, (key, deadline) in enumerate(view.timers):
        if n:
            timers.append(" · ")
        for member_id, client in names.items():
            key = key.replace(member_id, f"{client}…")
        timers.append(key, style="cyan")
        timers.append(f" → {deadline:,}")
    if not view.timers:
        timers.append("none", style="dim")
    if consumer is None:
        return Group(table, timers)
    return Group(table, consumer, timers) if view.groups else Group(consumer, timers)


def _partitions(assignment: tuple[tuple[str, tuple[int, ...]], ...]) -> str:
    return " ".join(f"{topic}-{p}" for topic, parts in assignment for p in parts)


def _countdown(deadline: int, now: int) -> Text:
    if deadline < 0:
        return Text("-", style="dim")
    left = max(0, deadline - now)
    return Text(f"{left:,}", style="red" if left <= 1000 else "")


def consumer_group_table(
    frame: Frame, groups: tuple[ConsumerGroupView, ...], names: dict[str, str], coordinator: str = ""
) -> Table | None:
    """KIP-848 consumer groups, one row per member: the group and assignment epochs, the member's epoch
    and state, what it owns (revoking in red) against its target, and its keyed tasks (session and
    rebalance timeouts) counting down: ms left to their deadlines. ``coordinator`` heads the title when
    the broker has no classic group to show.

    Adds each member's id -> client id to ``names`` (the keyed timers line shortens the keys with it).
    """
    if not groups:
        return None
    title = "consumer groups (KIP-848) · epochs, owned vs target, session/rebalance ms left"
    table = section_table(f"{coordinator} · {title}" if coordinator else title)
    columns = ("group", "state", "epoch/asg", "member", "epoch", "m.state", "owns", "target")
    for column in (*columns, "session", "rebalance"):
        numeric = column in ("epoch", "session", "rebalance", "epoch/asg")
        table.add_column(column, justify="right" if numeric else "left")
    now = frame.time_ms
    styles = {"Stable": "green", "Assigning": "yellow", "Reconciling": "yellow"}
    for group in groups:
        head = [
            group.group_id,
            Text(group.state, style=styles.get(group.state, "dim")),
            f"{group.group_epoch}/{group.assignment_epoch}",
        ]
        if not group.members:
            table.add_row(*head, *("-" for _ in range(7)))
        for n, member in enumerate(group.members):
            names[member.member_id] = member.client_id or member.member_id[:8]
            owns = Text(_partitions(member.assigned))
            revoking = _partitions(member.pending_revocation)
            if revoking:
                owns.append((" " if member.assigned else "") + revoking, style="red")
            lagging = member.member_epoch != group.assignment_epoch
            table.add_row(
                *(head if n == 0 else ("", "", "")),
                Text(names[member.member_id], style="bold"),
                Text(str(member.member_epoch), style="yellow" if lagging else ""),
                Text(
                    member.state.removesuffix("_PARTITIONS"),
                    style="green" if member.state == "STABLE" else "yellow",
                ),
                owns,
                _partitions(member.target),
                _countdown(member.session_deadline_ms, now),
                _countdown(member.rebalance_deadline_ms, now),
            )
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
    return " · ".join(("expectations", *Tally.of(frame.expectations).parts()))


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


def _section(title: str, body: RenderableType) -> Group:
    """A titled section with one rule line above it (a small screen's panel)."""
    rule = Text(f"── {title} ", style="blue", no_wrap=True, overflow="ellipsis")
    return Group(rule, body)


def _height(console: Console, renderable: RenderableType, width: int) -> int:
    return len(console.render_lines(renderable, console.options.update(width=width, height=None)))


def render_frame(
    frame: Frame, console: Console, height: int | None = None, events: int = 14
) -> RenderableType:
    """The whole frame at the console's width; fitted to ``height`` lines when given.

    Fitted, the events and the expectations share the lines the rest leaves: the
    expectations take what they need up to half, the events the others. When fewer than
    ``MIN_LOG_LINES`` would be left, only the chosen broker's purgatories are listed; when
    that is still not enough (an 80x24 terminal), the frame goes compact (``_compact``).
    """
    width = console.options.max_width
    top: list[RenderableType] = [header(frame, width), wheel_panel(frame), _middle(frame, width)]
    coordinator = coordinator_table(frame)
    if coordinator is not None:
        top.append(coordinator)
    transactions = transactions_table(frame.view, frame.broker)
    if transactions is not None:
        top.append(transactions)
    if frame.delayed_messages is not None:
        top.append(delayed_messages_panel(frame.delayed_messages))
    if frame.retries is not None:
        top.append(retry_panel(frame.retries))
    if frame.share_partitions:
        top.append(share_panel(frame.share_partitions, frame.time_ms))
    if height is None:
        return Group(*top, _events_panel(frame, events, None), _expectations_panel(frame, None))
    sizes = [_height(console, part, width) for part in top]
    if height - sum(sizes) < MIN_LOG_LINES:
        top[2] = _middle(frame, width, only_chosen=True)
        sizes[2] = _height(console, top[2], width)
    if height - sum(sizes) < MIN_LOG_LINES:
        return _compact(frame, console, height, top[:2], sizes[:2])
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


def _compact(
    frame: Frame, console: Console, height: int, top: list[RenderableType], sizes: list[int]
) -> RenderableType:
    """A small screen: the header, the wheel a line per level, then a line per purgatory of the chosen broker
    and per partition (at most 3), then the events and the expectations under one-line titles.
    The expectations get what they need up to half of the rest, the events at least 2 lines."""
    width = console.options.max_width
    top = [top[0], wheel_panel(frame, compact=True)]
    sizes = [sizes[0], _height(console, top[1], width)]
    middle = compact_middle(frame, partitions=3)
    used = sum(sizes) + _height(console, middle, width)
    parts = [Layout(part, size=size) for part, size in zip(top, sizes, strict=True)]
    parts.append(Layout(middle, size=used - sum(sizes)))
    left = height - used
    if left >= 2:
        wanted = len(frame.expectations) + 1
        expectation_size = min(wanted, left // 2) if frame.expectations and left >= 4 else 0
        event_size = left - expectation_size
        events = _section(f"events · latest of {frame.events_total:,}", event_lines(frame, event_size - 1))
        parts.append(Layout(events, size=event_size))
        if expectation_size:
            body = expectation_lines(frame, wrap=False)
            parts.append(Layout(_section(expectation_title(frame), body), size=expectation_size))
    layout = Layout()
    layout.split_column(*parts)
    return layout
