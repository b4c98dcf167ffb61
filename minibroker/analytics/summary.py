"""The rich terminal summaries of ``analyze`` and ``sweep`` (the report has the details)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from minibroker.analytics.analyze import Analysis
    from minibroker.analytics.sweepfile import Sweep

AUDIT_SHOWN = 20


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _table(title: str, rows: list[dict[str, Any]], columns: list[str]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(
            column,
            justify="left"
            if column in ("purgatory", "op_kind", "cause", "op", "problem", "trace")
            else "right",
        )
    for row in rows:
        table.add_row(*(_fmt(row.get(column)) for column in columns))
    return table


def print_analysis(analysis: Analysis, console: Console, master: str) -> None:
    traces = analysis.rows("traces")
    console.print(
        f"[bold]analyzed {analysis.events:,} events from {len(traces):,} trace(s)[/] "
        f"in {analysis.seconds:.1f} s on {master} ({analysis.bucket_ms} ms buckets)"
    )
    for row in analysis.rows("skipped"):
        console.print(
            f"[yellow]{row['trace']}: skipped {row['rows']:,} row(s): {row['problem']} "
            f"(first at {row['first']})[/]"
        )
    console.print(
        _table(
            "operations (expiry rate = expiry / completed)",
            analysis.rows("operations"),
            [
                "purgatory",
                "op_kind",
                "created",
                "completed",
                "condition",
                "expiry",
                "leadership",
                "waiting",
                "crashed",
                "lost",
                "expiry_rate",
            ],
        )
    )
    console.print(
        _table(
            "completion latency (ms)",
            analysis.rows("latency"),
            ["purgatory", "op_kind", "cause", "count", "p50", "p90", "p99", "p999", "max"],
        )
    )
    timer = analysis.timer_summary()
    if timer["fires"]:
        console.print(
            f"timer precision: {timer['fires']:,} tasks fired, fire − expiration "
            f"min {timer['min']} / p50 {timer['p50']} / p99 {timer['p99']} / max {timer['max']} ms"
        )
    if analysis.audit_total == 0:
        console.print("[green]exactly-once audit: no problem[/]")
        return
    counts = ", ".join(f"{problem}: {count:,}" for problem, count in sorted(analysis.audit_counts().items()))
    console.print(f"[red bold]exactly-once audit: {analysis.audit_total:,} problem(s)[/] ({counts})")
    console.print(
        _table(
            f"audit (first {min(AUDIT_SHOWN, analysis.audit_total)})",
            analysis.rows("audit")[:AUDIT_SHOWN],
            ["trace", "broker", "op", "created_ms", "completions", "expirations", "problem"],
        )
    )


def print_sweep(
    sweep: Sweep, rows: list[dict[str, Any]], console: Console, seconds: float, master: str
) -> None:
    console.print(f"[bold]sweep {sweep.name}[/]: {len(rows)} variants in {seconds:.1f} s on {master}")
    axes = [axis.name for axis in sweep.axes]
    shown = [
        *axes,
        "seed",
        "requests",
        "timeout_rate",
        "error_rate",
        "produce_p50",
        "produce_p99",
        "expirations",
        "expectations_failed",
    ]
    table = _table("variants", rows[:40], shown)
    console.print(table)
    if len(rows) > 40:
        console.print(f"… and {len(rows) - 40} more (see the report)")
