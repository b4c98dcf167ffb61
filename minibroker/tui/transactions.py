"""The transactions section: every transactional id on the coordinator that owns it, and the LSO.

Shown only when a broker leads a ``__transaction_state`` partition (the cluster has transactions),
so the frames of other scenarios are what they were. A row per id: its state (a write in flight
shown as ``→ state``), producer id/epoch, partitions, coordinator and, while a transaction is open,
when it began, when it times out and when the coordinator's periodic check will abort it, as a
countdown in virtual ms (Kafka's ``abortTimedOutTransactions`` runs every
``transaction.abort.timed.out.transaction.cleanup.interval.ms`` and aborts a transaction whose
start plus timeout lies strictly before the check).

``lso_cell`` is the partitions table's LSO column: the leader's last stable offset, in yellow with
the number of offsets it holds back when it trails the HW (what READ_COMMITTED readers cannot see).
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from minibroker.sim.snapshot import ClusterView, PartitionView
from minibroker.tui.tables import section_table

STATE_STYLES = {
    "Ongoing": "bold yellow",
    "PrepareCommit": "cyan",
    "PrepareAbort": "red",
    "PrepareEpochFence": "red",
    "CompleteCommit": "green",
    "CompleteAbort": "magenta",
    "Empty": "dim",
}


def has_transactions(view: ClusterView) -> bool:
    """Whether any live broker coordinates transactions (leads a ``__transaction_state`` partition)."""
    return any(broker.transactions is not None for broker in view.brokers)


def lso_cell(partition: PartitionView) -> Text:
    """The leader's LSO; ``0 −4`` in yellow when it is 4 offsets below the HW, ``-`` without a leader."""
    if partition.leader < 0:
        return Text("-", style="dim")
    leader = partition.replica(partition.leader)
    if not leader.alive:
        return Text("-", style="dim")
    held = leader.high_watermark - leader.last_stable_offset
    text = Text(f"{leader.last_stable_offset:,}")
    if held > 0:
        text.stylize("bold yellow")
        text.append(f" −{held:,}", style="yellow")
    return text


def _open(now_ms: int, start_ms: int, timeout_ms: int, abort_at_ms: int) -> tuple[Text, ...]:
    """began, due (began + timeout), the abort check and the countdown to it; dashes when none is open."""
    if start_ms < 0:
        return tuple(Text("-", style="dim") for _ in range(4))
    if abort_at_ms < 0:
        return Text(f"{start_ms:,}"), Text(f"{start_ms + timeout_ms:,}"), Text("-"), Text("-")
    return (
        Text(f"{start_ms:,}"),
        Text(f"{start_ms + timeout_ms:,}"),
        Text(f"{abort_at_ms:,}", style="bold"),
        Text(f"{max(0, abort_at_ms - now_ms):,}", style="bold yellow"),
    )


def transactions_table(view: ClusterView, chosen: int) -> Table | None:
    """Every transactional id of every coordinator (the chosen broker's in bold); None without any."""
    coordinators = [(b.broker, b.transactions) for b in view.brokers if b.transactions is not None]
    if not coordinators:
        return None
    checks = " · ".join(
        f"b{broker} next {t.next_check_ms:,}" for broker, t in coordinators if t.next_check_ms >= 0
    )
    interval = coordinators[0][1].check_interval_ms
    table = section_table(
        f"transactions (ms) · abort check every {interval:,}"
        + (f" ({checks})" if checks else "")
        + " aborts those past due"
    )
    columns = (
        "txn id",
        "state",
        "pid/epoch",
        "partitions",
        "coord",
        "timeout",
        "began",
        "due",
        "abort",
        "in ms",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in ("txn id", "state", "partitions") else "right")
    rows = 0
    for broker, coordinator in coordinators:
        for loading in coordinator.loading:
            table.add_row(
                Text(f"partition {loading}", style="dim"),
                Text("loading", style="yellow"),
                "",
                "",
                f"b{broker}",
                *[""] * 5,
            )
        for txn in coordinator.transactions:
            rows += 1
            state = Text(txn.state, style=STATE_STYLES.get(txn.state, ""))
            if txn.pending is not None:
                state.append(f" → {txn.pending}", style="yellow")
            table.add_row(
                txn.transactional_id,
                state,
                f"{txn.producer_id}/{txn.producer_epoch}",
                ", ".join(txn.partitions) or "-",
                f"b{broker}",
                f"{txn.timeout_ms:,}",
                *_open(view.time_ms, txn.start_ms, txn.timeout_ms, txn.abort_at_ms),
                style="bold" if broker == chosen else "",
            )
    if not rows and not any(c.loading for _, c in coordinators):
        table.add_row(Text("no transactional id yet", style="dim"), *[""] * 9)
    return table
